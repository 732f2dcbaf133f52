package charts

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// A release the cluster test installs: a chart of this folder with the
// values files a test install layers over its values.yaml.
type release struct {
	name  string
	chart string // relative to the repository's root, where helm runs
	// values: helm's --values and --set arguments, for its install and
	// its upgrade alike.
	values []string
	// upgrade: the --set arguments of the upgrade, each a change to every
	// Deployment's pod template, so that all of them roll out.
	upgrade []string
}

// The annotation the upgrade adds to every pod template.
const (
	upgradeAnnotation = "esim.dev/cluster-test"
	upgradeValue      = "upgraded"
)

// platformReleases: every service's chart, released under its own name with
// its values-dev.yaml (the way the Tiltfile deploys them), and its
// NetworkPolicies on, so that they are installed and removed too.
func platformReleases(t *testing.T) []release {
	var rs []release
	for _, c := range applicationCharts(t) {
		rs = append(rs, release{
			name:   c,
			chart:  "charts/" + c,
			values: []string{"--values", "charts/" + c + "/values-dev.yaml", "--set", "networkPolicy.enabled=true"},
			upgrade: []string{"--set-string",
				"podAnnotations." + strings.ReplaceAll(upgradeAnnotation, ".", `\.`) + "=" + upgradeValue},
		})
	}
	return rs
}

// TestPlatformOnCluster installs the platform on a real control plane
// (kube-apiserver, etcd, controller-manager, scheduler, and kwok's fake
// node; tools/cluster/cluster.sh), with the pinned helm, into a namespace
// that enforces the restricted Pod Security Standard: every Deployment
// must become Available; an upgrade that changes the pod templates must
// roll each one out; a rollback must bring the first templates back; and
// an uninstall must leave nothing of the release behind. No container
// runs (kwok reports pods Running), so this tests what the API server,
// its admission and the controllers make of the charts, not the services.
//
// make test builds the control plane first (make cluster-tools, once per
// machine); a bare go test builds it on its first run, about 8 minutes on
// 2 cores.
func TestPlatformOnCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Kubernetes control plane")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 8*time.Minute)
	defer cancel()
	c := startCluster(ctx, t)

	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace, Labels: map[string]string{
		"pod-security.kubernetes.io/enforce": "restricted",
		"pod-security.kubernetes.io/warn":    "restricted",
	}}}
	if _, err := c.client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace %s: %v", namespace, err)
	}
	c.checkRestrictedEnforced(ctx, t)

	releases := platformReleases(t)
	for _, r := range releases {
		c.helm(ctx, t, append([]string{"install", r.name, r.chart, "--namespace", namespace}, r.values...)...)
	}
	installed := c.waitRolledOut(ctx, t, "the install", nil)
	if len(installed) == 0 {
		t.Fatal("the install made no Deployment")
	}
	t.Logf("installed: %d Deployments Available: %v", len(installed), installed)

	for _, r := range releases {
		args := append([]string{"upgrade", r.name, r.chart, "--namespace", namespace}, r.values...)
		c.helm(ctx, t, append(args, r.upgrade...)...)
	}
	upgraded := c.waitRolledOut(ctx, t, "the upgrade", func(d *appsv1.Deployment) error {
		if got := d.Spec.Template.Annotations[upgradeAnnotation]; got != upgradeValue {
			return fmt.Errorf("pod template annotation %s is %q, want %q", upgradeAnnotation, got, upgradeValue)
		}
		return nil
	})
	for name, hash := range installed {
		if upgraded[name] == "" {
			t.Errorf("Deployment %s is gone after the upgrade", name)
		} else if upgraded[name] == hash {
			t.Errorf("Deployment %s: the upgrade rolled out no new ReplicaSet (pod-template-hash %s before and after)", name, hash)
		}
	}
	if len(upgraded) != len(installed) {
		t.Errorf("Deployments after the install %v, after the upgrade %v", slices.Sorted(maps.Keys(installed)), slices.Sorted(maps.Keys(upgraded)))
	}
	t.Logf("upgraded: every Deployment rolled out a new template: %v", upgraded)

	for _, r := range releases {
		c.helm(ctx, t, "rollback", r.name, "1", "--namespace", namespace)
	}
	rolledBack := c.waitRolledOut(ctx, t, "the rollback", func(d *appsv1.Deployment) error {
		if got, ok := d.Spec.Template.Annotations[upgradeAnnotation]; ok {
			return fmt.Errorf("pod template still has annotation %s=%q", upgradeAnnotation, got)
		}
		return nil
	})
	for name, hash := range installed {
		if rolledBack[name] != hash {
			t.Errorf("Deployment %s: after the rollback its pods are of template %s, want the install's %s", name, rolledBack[name], hash)
		}
	}

	t.Logf("rolled back: every Deployment runs its first template again")

	for _, r := range releases {
		c.helm(ctx, t, "uninstall", r.name, "--namespace", namespace)
	}
	c.waitNamespaceEmpty(ctx, t)
}

// cluster is one control plane started by tools/cluster/cluster.sh.
type cluster struct {
	dir, kubeconfig string
	helmHome        string
	client          kubernetes.Interface
	dynamic         dynamic.Interface
	discovery       discovery.DiscoveryInterface
}

// startCluster starts a control plane in a temporary directory and stops
// it when the test ends. --owner stops it too should the test process die
// before its cleanup runs (a test timeout, a kill).
func startCluster(ctx context.Context, t *testing.T) *cluster {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(root, "tools", "cluster", "cluster.sh")
	c := &cluster{dir: filepath.Join(t.TempDir(), "cluster"), helmHome: t.TempDir()}
	t.Cleanup(func() {
		if t.Failed() {
			c.logTails(t)
		}
		out, err := exec.Command(script, "stop", c.dir).CombinedOutput()
		if err != nil {
			t.Errorf("cluster.sh stop %s: %v\n%s", c.dir, err, out)
		}
	})
	cmd := exec.CommandContext(ctx, script, "start", c.dir, "--owner", strconv.Itoa(os.Getpid()))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("cluster.sh start %s: %v\n%s", c.dir, err, stderr.String())
	}
	c.kubeconfig = strings.TrimSpace(string(out))

	cfg, err := clientcmd.BuildConfigFromFlags("", c.kubeconfig)
	if err != nil {
		t.Fatalf("kubeconfig %s: %v", c.kubeconfig, err)
	}
	// Listing every resource type includes the deprecated v1 Endpoints,
	// which the API server warns of at each list.
	cfg.WarningHandler = rest.NoWarnings{}
	// Client-go's default of 5 requests a second would throttle the look
	// at every resource type; the control plane is the test's alone.
	cfg.QPS, cfg.Burst = 200, 400
	if c.client, err = kubernetes.NewForConfig(cfg); err != nil {
		t.Fatal(err)
	}
	if c.dynamic, err = dynamic.NewForConfig(cfg); err != nil {
		t.Fatal(err)
	}
	if c.discovery, err = discovery.NewDiscoveryClientForConfig(cfg); err != nil {
		t.Fatal(err)
	}
	return c
}

// logTails shows the end of each control-plane process's log, for a test
// that failed because of the control plane rather than the charts.
func (c *cluster) logTails(t *testing.T) {
	logs, _ := filepath.Glob(filepath.Join(c.dir, "logs", "*.log"))
	for _, f := range logs {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
		t.Logf("the end of %s:\n%s", filepath.Base(f), strings.Join(lines[max(0, len(lines)-10):], "\n"))
	}
}

// helm runs the pinned helm (tilt/helm.sh) against the cluster, from the
// repository's root, with a configuration of its own (no repositories or
// plugins of the developer's), and returns its output. A failure fails the
// test with that output, and so does a Pod Security warning: the API
// server warns about a Deployment whose pods `restricted` would refuse (and
// the Deployment would never become Available).
func (c *cluster) helm(ctx context.Context, t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(ctx, "tilt/helm.sh", args...)
	cmd.Dir = ".."
	cmd.Env = append(os.Environ(),
		"KUBECONFIG="+c.kubeconfig,
		"HELM_CONFIG_HOME="+filepath.Join(c.helmHome, "config"),
		"HELM_CACHE_HOME="+filepath.Join(c.helmHome, "cache"),
		"HELM_DATA_HOME="+filepath.Join(c.helmHome, "data"),
	)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	if strings.Contains(string(out), "PodSecurity") {
		t.Fatalf("helm %s: the API server warns of Pod Security violations:\n%s", strings.Join(args, " "), out)
	}
	return string(out)
}

// checkRestrictedEnforced makes sure the namespace refuses a pod that the
// restricted standard forbids (root, privilege escalation, no seccomp
// profile), so that Deployments becoming Available there means something.
// A dry run: admission runs, nothing is stored.
func (c *cluster) checkRestrictedEnforced(ctx context.Context, t *testing.T) {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "not-restricted", Namespace: namespace},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name:            "c",
			Image:           "example.invalid/c:1",
			SecurityContext: &corev1.SecurityContext{RunAsUser: new(int64(0)), Privileged: new(true)},
		}}},
	}
	_, err := c.client.CoreV1().Pods(namespace).Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	if err == nil {
		t.Fatalf("namespace %s admitted a privileged pod running as root: Pod Security admission is not enforcing restricted", namespace)
	}
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "violates PodSecurity") {
		t.Fatalf("creating a privileged pod in %s: want Pod Security's refusal, got %v", namespace, err)
	}
}

// waitRolledOut waits until every Deployment of the namespace has rolled
// out its current template (all replicas updated and available, no old
// ones left, Available) and passes check, and returns each one's
// pod-template-hash: the template its running pods were made from. On
// timeout it fails the test with what each Deployment and its pods say.
func (c *cluster) waitRolledOut(ctx context.Context, t *testing.T, what string, check func(*appsv1.Deployment) error) map[string]string {
	t.Helper()
	// pending is why Deployments were not rolled out at the last look.
	var hashes map[string]string
	var pending []string
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		deps, err := c.client.AppsV1().Deployments(namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			// The last answer's reasons say more than the deadline's error.
			if ctx.Err() == nil {
				pending = []string{"listing Deployments: " + err.Error()}
			}
			return false, nil
		}
		hashes, pending = map[string]string{}, nil
		for i := range deps.Items {
			d := &deps.Items[i]
			hash, err := c.rolledOut(ctx, d)
			if err == nil && check != nil {
				err = check(d)
			}
			if err != nil {
				pending = append(pending, fmt.Sprintf("%s: %v", d.Name, err))
				continue
			}
			hashes[d.Name] = hash
		}
		return len(pending) == 0, nil
	})
	if err != nil {
		t.Fatalf("after %s, not every Deployment rolled out (%v):\n  %s\n%s", what, err,
			strings.Join(pending, "\n  "), c.describe(t))
	}
	return hashes
}

// rolledOut returns the pod-template-hash of a Deployment that has
// finished rolling out, or why it has not.
func (c *cluster) rolledOut(ctx context.Context, d *appsv1.Deployment) (string, error) {
	want := deref(d.Spec.Replicas, 1)
	s := d.Status
	switch {
	case s.ObservedGeneration < d.Generation:
		return "", fmt.Errorf("generation %d not yet observed (at %d)", d.Generation, s.ObservedGeneration)
	case s.UpdatedReplicas != want || s.Replicas != want || s.AvailableReplicas != want:
		return "", fmt.Errorf("%d updated, %d in all, %d available of %d replicas", s.UpdatedReplicas, s.Replicas, s.AvailableReplicas, want)
	}
	available := false
	for _, cond := range s.Conditions {
		if cond.Type == appsv1.DeploymentAvailable && cond.Status == corev1.ConditionTrue {
			available = true
		}
	}
	if !available {
		return "", errors.New("not Available")
	}
	// The ReplicaSets of the Deployment that still have pods: once the
	// rollout is over, only the one of its current template.
	rss, err := c.client.AppsV1().ReplicaSets(namespace).List(ctx, metav1.ListOptions{
		LabelSelector: metav1.FormatLabelSelector(d.Spec.Selector),
	})
	if err != nil {
		return "", err
	}
	var live []string
	for _, rs := range rss.Items {
		if metav1.IsControlledBy(&rs, d) && deref(rs.Spec.Replicas, 0) > 0 {
			live = append(live, rs.Labels[appsv1.DefaultDeploymentUniqueLabelKey])
		}
	}
	if len(live) != 1 {
		return "", fmt.Errorf("ReplicaSets with pods: %v, want one", live)
	}
	return live[0], nil
}

// describe reports the namespace's Deployments (their conditions and
// status), ReplicaSets and pods, and its warning events: what a wait that
// timed out was waiting on.
func (c *cluster) describe(t *testing.T) string {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var b strings.Builder
	deps, err := c.client.AppsV1().Deployments(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return "listing Deployments: " + err.Error()
	}
	for _, d := range deps.Items {
		fmt.Fprintf(&b, "Deployment %s: generation %d (observed %d), replicas %d: %d updated, %d ready, %d available\n",
			d.Name, d.Generation, d.Status.ObservedGeneration, deref(d.Spec.Replicas, 1),
			d.Status.UpdatedReplicas, d.Status.ReadyReplicas, d.Status.AvailableReplicas)
		for _, cond := range d.Status.Conditions {
			fmt.Fprintf(&b, "  %s=%s %s: %s\n", cond.Type, cond.Status, cond.Reason, cond.Message)
		}
	}
	if rss, err := c.client.AppsV1().ReplicaSets(namespace).List(ctx, metav1.ListOptions{}); err == nil {
		for _, rs := range rss.Items {
			fmt.Fprintf(&b, "ReplicaSet %s: %d of %d ready\n", rs.Name, rs.Status.ReadyReplicas, deref(rs.Spec.Replicas, 0))
			for _, cond := range rs.Status.Conditions {
				fmt.Fprintf(&b, "  %s=%s %s: %s\n", cond.Type, cond.Status, cond.Reason, cond.Message)
			}
		}
	}
	if pods, err := c.client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{}); err == nil {
		for _, p := range pods.Items {
			fmt.Fprintf(&b, "Pod %s: %s on %q", p.Name, p.Status.Phase, p.Spec.NodeName)
			for _, cond := range p.Status.Conditions {
				if cond.Status != corev1.ConditionTrue {
					fmt.Fprintf(&b, ", %s=%s %s %s", cond.Type, cond.Status, cond.Reason, cond.Message)
				}
			}
			b.WriteString("\n")
		}
	}
	if events, err := c.client.CoreV1().Events(namespace).List(ctx, metav1.ListOptions{}); err == nil {
		// Events recorded through events.k8s.io have an EventTime and no
		// LastTimestamp.
		at := func(e corev1.Event) time.Time {
			if !e.LastTimestamp.IsZero() {
				return e.LastTimestamp.Time
			}
			return e.EventTime.Time
		}
		sort.Slice(events.Items, func(i, j int) bool { return at(events.Items[i]).Before(at(events.Items[j])) })
		for _, e := range events.Items {
			if e.Type != corev1.EventTypeNormal {
				fmt.Fprintf(&b, "Event %s %s/%s: %s: %s (x%d)\n", e.Type, e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.Message, max(e.Count, 1))
			}
		}
	}
	return b.String()
}

// What a namespace holds of its own, with no release in it.
func namespaceDefault(resource schema.GroupVersionResource, name string) bool {
	switch {
	case resource.Group == "" && resource.Resource == "configmaps":
		return name == "kube-root-ca.crt"
	case resource.Group == "" && resource.Resource == "serviceaccounts":
		return name == "default"
	}
	return false
}

// waitNamespaceEmpty waits until the namespace holds nothing but what every
// namespace holds (and events), looking at every resource type the API
// server serves, so that whatever an uninstall leaves behind is found,
// whatever its kind. Pods, ReplicaSets and endpoints go a moment after
// their owners, by the garbage collector and the controllers.
func (c *cluster) waitNamespaceEmpty(ctx context.Context, t *testing.T) {
	t.Helper()
	lists, err := c.discovery.ServerPreferredNamespacedResources()
	if err != nil {
		t.Fatalf("discovering the API's resources: %v", err)
	}
	var resources []schema.GroupVersionResource
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range l.APIResources {
			if slices.Contains(r.Verbs, "list") && r.Name != "events" {
				resources = append(resources, gv.WithResource(r.Name))
			}
		}
	}
	// left is what the last whole look found; lastErr, why a later one
	// did not finish.
	var left []string
	var lastErr error
	err = wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		var now []string
		for _, r := range resources {
			objs, err := c.dynamic.Resource(r).Namespace(namespace).List(ctx, metav1.ListOptions{})
			if err != nil {
				lastErr = fmt.Errorf("listing %s: %w", r.Resource, err)
				return false, nil
			}
			for _, o := range objs.Items {
				if !namespaceDefault(r, o.GetName()) {
					now = append(now, r.Resource+"/"+o.GetName())
				}
			}
		}
		left, lastErr = now, nil
		return len(left) == 0, nil
	})
	if err != nil {
		if left == nil && lastErr != nil {
			left = []string{lastErr.Error()}
		}
		t.Fatalf("after the uninstall, the namespace still holds (%v):\n  %s", err, strings.Join(left, "\n  "))
	}
}

// deref is *p, or def when p is nil (an unset replica count).
func deref[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}
