package charts

import (
	"bytes"
	"context"
	"encoding/base64"
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
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// The release the cluster test installs, as README's operator section
// does (`helm install esim charts/esim`, from the repository's root, where
// helm runs), with the SM-DP+ simulator too, so that every service's chart
// is in it. The simulator's certificate Secret (smdp-sim-tls) is made by
// its chart, as in development; an operator would bring one.
const (
	clusterRelease = "esim"
	clusterChart   = "charts/" + umbrella
)

var clusterValues = []string{
	"--set", "smdp-sim.enabled=true",
}

// The value the upgrade changes, for every service at once (global.env):
// each Deployment's pod template, and so each must roll out.
const (
	upgradeEnv   = "LOG_LEVEL"
	upgradeValue = "debug"
)

// TestPlatformOnCluster installs the platform on a real control plane
// (kube-apiserver, etcd, controller-manager, scheduler, and kwok's fake
// node; tools/cluster/cluster.sh), with the pinned helm, into a namespace
// that enforces the restricted Pod Security Standard, as an operator would:
// the Secrets README names first, then one helm install. Every Deployment
// must become Available, with every Secret and ConfigMap its pods read
// there; an upgrade that changes a shared value must roll each one out; a
// rollback must bring the first templates back; and an uninstall must
// leave nothing of the release behind. No container runs (kwok reports
// pods Running), so this tests what the API server, its admission and the
// controllers make of the charts, not the services.
//
// make test builds the control plane first (make cluster-tools, once per
// machine); a bare go test builds it on its first run, 8 to 14 minutes on
// 2 cores (give it -timeout 30m then).
func TestPlatformOnCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Kubernetes control plane")
	}
	script := clusterScript(t)
	// Outside the test's deadline: the first run on a machine builds the
	// control plane, for minutes, unless make cluster-tools did.
	if out, err := exec.CommandContext(t.Context(), script, "build").CombinedOutput(); err != nil {
		t.Fatalf("cluster.sh build: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 8*time.Minute)
	defer cancel()
	c := startCluster(ctx, t, script)

	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace, Labels: map[string]string{
		"pod-security.kubernetes.io/enforce": "restricted",
		"pod-security.kubernetes.io/warn":    "restricted",
	}}}
	if _, err := c.client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace %s: %v", namespace, err)
	}
	c.checkRestrictedEnforced(ctx, t)
	operators := c.createOperatorSecrets(ctx, t)

	c.helm(ctx, t, append([]string{"install", clusterRelease, clusterChart, "--namespace", namespace}, clusterValues...)...)
	installed := c.waitRolledOut(ctx, t, "the install", func(d *appsv1.Deployment) error {
		return envIs(d, upgradeEnv, func(v string) bool { return v != upgradeValue }, "not "+upgradeValue)
	})
	if len(installed) != len(services) {
		t.Fatalf("the install made Deployments %v, want one per service (%d)", slices.Sorted(maps.Keys(installed)), len(services))
	}
	c.checkPodReferences(ctx, t)
	t.Logf("installed: %d Deployments Available: %v", len(installed), installed)
	credentials := c.internalCredentials(ctx, t)

	args := append([]string{"upgrade", clusterRelease, clusterChart, "--namespace", namespace}, clusterValues...)
	c.helm(ctx, t, append(args, "--set", "global.env."+upgradeEnv+"="+upgradeValue)...)
	upgraded := c.waitRolledOut(ctx, t, "the upgrade", func(d *appsv1.Deployment) error {
		return envIs(d, upgradeEnv, func(v string) bool { return v == upgradeValue }, upgradeValue)
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
	c.checkPodReferences(ctx, t)
	t.Logf("upgraded: every Deployment rolled out a new template: %v", upgraded)
	// The chart makes the services' tokens once: an upgrade that made new
	// ones would leave old pods refusing new pods' calls mid-rollout.
	if after := c.internalCredentials(ctx, t); !maps.EqualFunc(after, credentials, bytes.Equal) {
		t.Errorf("the upgrade changed the internal credentials (%s): keys before %v, after %v", internalSecret, slices.Sorted(maps.Keys(credentials)), slices.Sorted(maps.Keys(after)))
	}

	c.helm(ctx, t, "rollback", clusterRelease, "1", "--namespace", namespace)
	rolledBack := c.waitRolledOut(ctx, t, "the rollback", func(d *appsv1.Deployment) error {
		return envIs(d, upgradeEnv, func(v string) bool { return v != upgradeValue }, "not "+upgradeValue)
	})
	for name, hash := range installed {
		if rolledBack[name] != hash {
			t.Errorf("Deployment %s: after the rollback its pods are of template %s, want the install's %s", name, rolledBack[name], hash)
		}
	}
	c.checkPodReferences(ctx, t)
	t.Logf("rolled back: every Deployment runs its first template again")

	c.helm(ctx, t, "uninstall", clusterRelease, "--namespace", namespace)
	c.waitReleaseGone(ctx, t, clusterRelease, operators)
}

// internalCredentials reads what the umbrella made into its Secret.
func (c *cluster) internalCredentials(ctx context.Context, t *testing.T) map[string][]byte {
	t.Helper()
	s, err := c.client.CoreV1().Secrets(namespace).Get(ctx, internalSecret, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("read Secret %s: %v", internalSecret, err)
	}
	if len(s.Data) == 0 {
		t.Fatalf("Secret %s holds nothing", internalSecret)
	}
	return s.Data
}

// envIs reports a Deployment whose pods do not set the variable name, or
// set it to a value that ok refuses (want says what it accepts).
func envIs(d *appsv1.Deployment, name string, ok func(string) bool, want string) error {
	set := false
	for _, ctr := range d.Spec.Template.Spec.Containers {
		for _, e := range ctr.Env {
			if e.Name != name {
				continue
			}
			if !ok(e.Value) {
				return fmt.Errorf("container %s has %s=%q, want %s", ctr.Name, name, e.Value, want)
			}
			set = true
		}
	}
	if !set {
		return fmt.Errorf("no container sets %s", name)
	}
	return nil
}

// createOperatorSecrets creates the Secrets the operator brings before the
// install (operatorSecrets, as README's operator section names them), with
// values of the right shape (the databases and Redis need not exist: no
// service runs), and returns their names: they are the operator's, and
// outlive the release.
func (c *cluster) createOperatorSecrets(ctx context.Context, t *testing.T) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	for name, keys := range operatorSecrets {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}, StringData: map[string]string{}}
		for _, k := range keys {
			switch name {
			case "esim-database":
				s.StringData[k] = "postgres://" + k + ":secret@postgres.invalid:5432/" + k + "?sslmode=require"
			case "esim-redis":
				s.StringData[k] = "rediss://:secret@redis.invalid:6379/0"
			default:
				s.StringData[k] = base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, 32))
			}
		}
		if _, err := c.client.CoreV1().Secrets(namespace).Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create the operator's Secret %s: %v", name, err)
		}
		names[name] = true
	}
	return names
}

// checkPodReferences checks that every Secret and ConfigMap the pods read
// (environment variables, volumes), and every key of them they name,
// exists in the namespace: a kubelet would not start a container without
// them (CreateContainerConfigError, or a volume that never mounts), and
// kwok's fake one starts pods regardless. Optional references may be
// missing.
func (c *cluster) checkPodReferences(ctx context.Context, t *testing.T) {
	t.Helper()
	pods, err := c.client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("listing pods: %v", err)
	}
	secrets, configMaps := map[string]map[string]bool{}, map[string]map[string]bool{}
	if list, err := c.client.CoreV1().Secrets(namespace).List(ctx, metav1.ListOptions{}); err != nil {
		t.Fatalf("listing Secrets: %v", err)
	} else {
		for _, s := range list.Items {
			secrets[s.Name] = map[string]bool{}
			for k := range s.Data {
				secrets[s.Name][k] = true
			}
		}
	}
	if list, err := c.client.CoreV1().ConfigMaps(namespace).List(ctx, metav1.ListOptions{}); err != nil {
		t.Fatalf("listing ConfigMaps: %v", err)
	} else {
		for _, m := range list.Items {
			configMaps[m.Name] = map[string]bool{}
			for k := range m.Data {
				configMaps[m.Name][k] = true
			}
		}
	}
	missing := map[string]bool{}
	need := func(pod, kind string, objs map[string]map[string]bool, name, key string, optional *bool) {
		if deref(optional, false) {
			return
		}
		switch {
		case objs[name] == nil:
			missing[fmt.Sprintf("pod %s reads %s %s, which does not exist", pod, kind, name)] = true
		case key != "" && !objs[name][key]:
			missing[fmt.Sprintf("pod %s reads key %s of %s %s, which it does not hold", pod, key, kind, name)] = true
		}
	}
	for _, p := range pods.Items {
		// The pods that still run the previous template are on their way out.
		if p.DeletionTimestamp != nil {
			continue
		}
		for _, ctr := range slices.Concat(p.Spec.InitContainers, p.Spec.Containers) {
			for _, e := range ctr.Env {
				if r := e.ValueFrom; r != nil && r.SecretKeyRef != nil {
					need(p.Name, "Secret", secrets, r.SecretKeyRef.Name, r.SecretKeyRef.Key, r.SecretKeyRef.Optional)
				}
				if r := e.ValueFrom; r != nil && r.ConfigMapKeyRef != nil {
					need(p.Name, "ConfigMap", configMaps, r.ConfigMapKeyRef.Name, r.ConfigMapKeyRef.Key, r.ConfigMapKeyRef.Optional)
				}
			}
			for _, f := range ctr.EnvFrom {
				if f.SecretRef != nil {
					need(p.Name, "Secret", secrets, f.SecretRef.Name, "", f.SecretRef.Optional)
				}
				if f.ConfigMapRef != nil {
					need(p.Name, "ConfigMap", configMaps, f.ConfigMapRef.Name, "", f.ConfigMapRef.Optional)
				}
			}
		}
		for _, v := range p.Spec.Volumes {
			if s := v.Secret; s != nil {
				for _, it := range s.Items {
					need(p.Name, "Secret", secrets, s.SecretName, it.Key, s.Optional)
				}
				need(p.Name, "Secret", secrets, s.SecretName, "", s.Optional)
			}
			if m := v.ConfigMap; m != nil {
				for _, it := range m.Items {
					need(p.Name, "ConfigMap", configMaps, m.Name, it.Key, m.Optional)
				}
				need(p.Name, "ConfigMap", configMaps, m.Name, "", m.Optional)
			}
			if pr := v.Projected; pr != nil {
				for _, src := range pr.Sources {
					if s := src.Secret; s != nil {
						for _, it := range s.Items {
							need(p.Name, "Secret", secrets, s.Name, it.Key, s.Optional)
						}
						need(p.Name, "Secret", secrets, s.Name, "", s.Optional)
					}
					if m := src.ConfigMap; m != nil {
						for _, it := range m.Items {
							need(p.Name, "ConfigMap", configMaps, m.Name, it.Key, m.Optional)
						}
						need(p.Name, "ConfigMap", configMaps, m.Name, "", m.Optional)
					}
				}
			}
		}
	}
	for _, m := range slices.Sorted(maps.Keys(missing)) {
		t.Error(m)
	}
}

// clusterScript is the absolute path of tools/cluster/cluster.sh.
func clusterScript(t *testing.T) string {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(root, "tools", "cluster", "cluster.sh")
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
func startCluster(ctx context.Context, t *testing.T, script string) *cluster {
	t.Helper()
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

// waitReleaseGone waits until the namespace holds nothing but what every
// namespace holds (and events) and the operator's Secrets, and no
// cluster-wide object is the release's (Helm annotates each object it
// makes with its release). It looks at every resource type the API server
// serves, so that whatever an uninstall leaves behind is found, whatever
// its kind. Pods, ReplicaSets and endpoints go a moment after their
// owners, by the garbage collector and the controllers.
func (c *cluster) waitReleaseGone(ctx context.Context, t *testing.T, release string, operators map[string]bool) {
	t.Helper()
	// Discovery answers for both kinds of resources even when one API
	// group fails; none may here.
	lists, err := c.discovery.ServerPreferredResources()
	if err != nil {
		t.Fatalf("discovering the API's resources: %v", err)
	}
	type resource struct {
		gvr        schema.GroupVersionResource
		namespaced bool
	}
	var resources []resource
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range l.APIResources {
			if slices.Contains(r.Verbs, "list") && r.Name != "events" {
				resources = append(resources, resource{gv.WithResource(r.Name), r.Namespaced})
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
			var objs *unstructured.UnstructuredList
			var err error
			if r.namespaced {
				objs, err = c.dynamic.Resource(r.gvr).Namespace(namespace).List(ctx, metav1.ListOptions{})
			} else {
				objs, err = c.dynamic.Resource(r.gvr).List(ctx, metav1.ListOptions{})
			}
			if err != nil {
				lastErr = fmt.Errorf("listing %s: %w", r.gvr.Resource, err)
				return false, nil
			}
			for _, o := range objs.Items {
				switch {
				case !r.namespaced:
					if o.GetAnnotations()["meta.helm.sh/release-name"] == release {
						now = append(now, r.gvr.Resource+"/"+o.GetName()+" (cluster-wide)")
					}
				case namespaceDefault(r.gvr, o.GetName()):
				case r.gvr.Group == "" && r.gvr.Resource == "secrets" && operators[o.GetName()]:
				default:
					now = append(now, r.gvr.Resource+"/"+o.GetName())
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
		t.Fatalf("after the uninstall, the release left (%v):\n  %s", err, strings.Join(left, "\n  "))
	}
}

// deref is *p, or def when p is nil (an unset replica count).
func deref[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}
