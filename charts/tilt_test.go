package charts

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

// TestTiltCI runs the Tiltfile for real: `tilt ci` (the pinned tilt,
// tilt/tool.sh) against a Kubernetes control plane on loopback
// (tools/cluster/cluster.sh: its kwok node reports pods Running and Ready
// without running them), with ko pushing every service image to a registry
// on loopback (go-containerregistry's, tilt/tool.sh registry), as the
// Tiltfile does when ESIM_TILT_REGISTRY names one. tilt ci must bring
// every resource to ready: the namespace, Postgres, Redis and Kafka of
// k8s/, and each service of services.yaml, built, pushed, deployed from
// its chart after what it waits for. Afterwards every service's
// Deployment must run the image Tilt built, and the registry must hold it.
//
// The Tiltfile forwards no port on this cluster (no pod runs to forward
// to; tilt would retry each forever, though without counting it against
// readiness), and the test provides the volume Postgres claims, which a
// kind cluster's provisioner would.
//
// make test builds tilt, the registry, ko and the control plane first
// (make tilt-tools, make cluster-tools; once per machine); a bare go test
// builds what is missing on its first run (give it -timeout 30m then).
func TestTiltCI(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	// Outside tilt ci's deadline: the first run on a machine builds tilt
	// and the control plane, for minutes, unless make test's tilt-tools
	// and cluster-tools did.
	tilt, registry := tiltTools(t.Context(), t, root)
	ko := koBinary(t, root)
	script := clusterScript(t)
	if out, err := exec.CommandContext(t.Context(), script, "build").CombinedOutput(); err != nil {
		t.Fatalf("cluster.sh build: %v\n%s", err, out)
	}

	// Within go test's own timeout (10 minutes for the whole package by
	// default), so that cleanups still stop the control plane.
	deadline := time.Now().Add(10 * time.Minute)
	if d, ok := t.Deadline(); ok {
		deadline = d.Add(-30 * time.Second)
	}
	ctx, cancel := context.WithDeadline(t.Context(), deadline)
	defer cancel()

	// Its kubeconfig's context is esim-loopback, one the Tiltfile allows.
	c := startCluster(ctx, t, script)
	provideVolumes(ctx, t, c.client)
	reg := startRegistry(ctx, t, registry)

	snapshot := filepath.Join(t.TempDir(), "snapshot.json")
	// tilt's own timeout ends it before the context does, so that a stuck
	// run says what it waited for.
	timeout := time.Until(deadline) - 20*time.Second
	if timeout <= 0 {
		t.Fatalf("no time left for tilt ci before the test's deadline %s", deadline)
	}
	cmd := exec.CommandContext(ctx, tilt, "ci", "--file", "Tiltfile", "--timeout", timeout.Round(time.Second).String(),
		// Any free port: several runs, or a developer's tilt up, coexist.
		"--port", "0", "--output-snapshot-on-exit", snapshot)
	cmd.Dir = root
	cmd.Env = tiltEnv(t, map[string]string{
		"KUBECONFIG":         c.kubeconfig,
		"ESIM_TILT_REGISTRY": reg,
		"KO":                 ko,
	})
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err = cmd.Run()
	t.Logf("tilt ci took %s", time.Since(start).Round(time.Second))
	if err != nil {
		t.Fatalf("tilt ci: %v\n%s", err, out.String())
	}

	// tilt ci passed; make sure it was about the resources this test
	// expects, not fewer (a Tiltfile that deploys nothing passes too).
	want := []string{"(Tiltfile)", "namespace", "postgres", "redis", "kafka"}
	var services []string
	for _, s := range declared(t) {
		services = append(services, s.Name)
	}
	want = append(want, services...)
	slices.Sort(want)
	if got := snapshotResources(t, snapshot); !slices.Equal(got, want) {
		t.Errorf("tilt ci's resources %v, want the services of services.yaml and the dependencies of k8s/: %v", got, want)
	}

	// What tilt found ready is ready in the cluster too (tilt ci saw the
	// pods Ready; the controllers may take a moment more to count them),
	// and runs the images it built, from the registry.
	rolledOut := c.waitRolledOut(ctx, t, "tilt ci", nil)
	c.waitStatefulSetsReady(ctx, t)
	deps, err := c.client.AppsV1().Deployments(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	images := map[string]string{}
	for _, d := range deps.Items {
		images[d.Name] = d.Spec.Template.Spec.Containers[0].Image
	}
	for _, svc := range services {
		image := images[svc]
		prefix := reg + "/esim_" + svc + ":"
		if _, ok := rolledOut[svc]; !ok {
			t.Errorf("no Deployment %s after tilt ci", svc)
			continue
		}
		if !strings.HasPrefix(image, prefix) {
			t.Errorf("Deployment %s runs image %q, want one Tilt built and pushed (%s...)", svc, image, prefix)
			continue
		}
		if err := manifestExists(ctx, reg, "esim_"+svc, strings.TrimPrefix(image, prefix)); err != nil {
			t.Errorf("Deployment %s runs %s: %v", svc, image, err)
		}
	}
}

// tiltTools builds (once per machine) and returns the pinned tilt and
// registry.
func tiltTools(ctx context.Context, t *testing.T, root string) (tilt, registry string) {
	t.Helper()
	cmd := exec.CommandContext(ctx, filepath.Join(root, "tilt", "tool.sh"), "build")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	paths := strings.Fields(string(out))
	if err != nil || len(paths) != 2 {
		t.Fatalf("tilt/tool.sh build: %v (printed %q)\n%s", err, out, stderr.String())
	}
	return paths[0], paths[1]
}

// koBinary finds the pinned ko that `make tools` builds: on PATH under
// make, at .bin/ko otherwise.
func koBinary(t *testing.T, root string) string {
	t.Helper()
	if p, err := exec.LookPath("ko"); err == nil {
		return p
	}
	p := filepath.Join(root, ".bin", "ko")
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("ko is neither on PATH nor at %s: run `make tools` (make test does)", p)
	}
	return p
}

// startRegistry serves an in-memory OCI registry on a free loopback port
// until the test ends, and returns its host:port. localhost: ko and tilt
// speak plain HTTP to it, as to any registry on localhost.
func startRegistry(ctx context.Context, t *testing.T, bin string) string {
	t.Helper()
	cmd := exec.CommandContext(ctx, bin, "-port", "0")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("registry: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	// Its first line names the port it took; the rest (a line per request)
	// is drained so it never blocks on a full pipe.
	lines := bufio.NewScanner(stderr)
	serving := regexp.MustCompile(`serving on port (\d+)`)
	var seen []string
	for lines.Scan() {
		if m := serving.FindStringSubmatch(lines.Text()); m != nil {
			go func() { _, _ = io.Copy(io.Discard, stderr) }()
			return "localhost:" + m[1]
		}
		seen = append(seen, lines.Text())
	}
	t.Fatalf("registry exited without serving: %s", strings.Join(seen, "\n"))
	return ""
}

// tiltEnv is the environment tilt runs in: this one, with a HOME of its
// own (tilt keeps its API server's config and settings there, and the
// developer's must not change the run), Go's caches, settings file and
// the tools cache kept where they are (ko builds, and tilt/helm.sh finds
// helm, as before), and the given variables.
func tiltEnv(t *testing.T, set map[string]string) []string {
	t.Helper()
	keep := map[string]string{}
	for _, v := range []string{"GOCACHE", "GOMODCACHE", "GOPATH", "GOENV"} {
		out, err := exec.Command("go", "env", v).Output()
		if err != nil {
			t.Fatalf("go env %s: %v", v, err)
		}
		keep[v] = strings.TrimSpace(string(out))
	}
	keep["ESIM_TOOLS_CACHE"] = toolsCache(t)
	keep["HOME"] = t.TempDir()
	// Tilt's analytics would try to reach the internet from every run.
	keep["TILT_DISABLE_ANALYTICS"] = "1"
	maps.Copy(keep, set)
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if _, ok := keep[k]; !ok && !strings.HasPrefix(k, "XDG_") {
			env = append(env, kv)
		}
	}
	for k, v := range keep {
		env = append(env, k+"="+v)
	}
	return env
}

// toolsCache is $ESIM_TOOLS_CACHE, or its default as the Makefile and
// tilt/*.sh compute it.
func toolsCache(t *testing.T) string {
	if c := os.Getenv("ESIM_TOOLS_CACHE"); c != "" {
		return c
	}
	base := os.Getenv("XDG_CACHE_HOME")
	if base == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			t.Fatal(err)
		}
		base = filepath.Join(home, ".cache")
	}
	return filepath.Join(base, "esim-tools")
}

// snapshotResources reads tilt ci's --output-snapshot-on-exit and returns
// the names of its resources, sorted. (Their statuses there may lag behind
// the ones tilt ci decided on when it exited.)
func snapshotResources(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("tilt's snapshot: %v", err)
	}
	var snap struct {
		View struct {
			UIResources []struct {
				Metadata struct {
					Name string `json:"name"`
				} `json:"metadata"`
			} `json:"uiResources"`
		} `json:"view"`
	}
	if err := json.Unmarshal(data, &snap); err != nil {
		t.Fatalf("tilt's snapshot %s: %v", path, err)
	}
	var names []string
	for _, r := range snap.View.UIResources {
		names = append(names, r.Metadata.Name)
	}
	slices.Sort(names)
	return names
}

// provideVolumes gives every claim that k8s/'s StatefulSets will make (the
// Postgres data volume) a PersistentVolume reserved for it, as a kind
// cluster's storage provisioner would: the loopback control plane has
// none, and a claim left unbound keeps its pod, and every service that
// waits for Postgres, pending. Nothing is written to them: no container
// runs.
func provideVolumes(ctx context.Context, t *testing.T, client kubernetes.Interface) {
	t.Helper()
	dir := t.TempDir()
	n := 0
	for _, r := range devManifests(t) {
		sts, ok := r.obj.(*appsv1.StatefulSet)
		if !ok {
			continue
		}
		replicas := 1
		if sts.Spec.Replicas != nil {
			replicas = int(*sts.Spec.Replicas)
		}
		for _, tmpl := range sts.Spec.VolumeClaimTemplates {
			for i := range replicas {
				// The name the StatefulSet controller gives the claim.
				claim := fmt.Sprintf("%s-%s-%d", tmpl.Name, sts.Name, i)
				pv := &corev1.PersistentVolume{
					ObjectMeta: metav1.ObjectMeta{Name: sts.Namespace + "-" + claim},
					Spec: corev1.PersistentVolumeSpec{
						Capacity:    corev1.ResourceList{corev1.ResourceStorage: tmpl.Spec.Resources.Requests[corev1.ResourceStorage]},
						AccessModes: tmpl.Spec.AccessModes,
						ClaimRef:    &corev1.ObjectReference{Namespace: sts.Namespace, Name: claim},
						PersistentVolumeSource: corev1.PersistentVolumeSource{
							HostPath: &corev1.HostPathVolumeSource{Path: filepath.Join(dir, claim)},
						},
					},
				}
				if _, err := client.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
					t.Fatalf("create PersistentVolume %s: %v", pv.Name, err)
				}
				n++
			}
		}
	}
	if n == 0 {
		t.Fatal("k8s/ has no StatefulSet with a volume claim template: is Postgres's data volume gone?")
	}
}

// waitStatefulSetsReady waits until every StatefulSet in the platform's
// namespace (Postgres, Kafka) has its replicas updated and ready.
func (c *cluster) waitStatefulSetsReady(ctx context.Context, t *testing.T) {
	t.Helper()
	var pending []string
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		sets, err := c.client.AppsV1().StatefulSets(namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			if ctx.Err() == nil {
				pending = []string{"listing StatefulSets: " + err.Error()}
			}
			return false, nil
		}
		pending = nil
		for _, s := range sets.Items {
			want := deref(s.Spec.Replicas, 1)
			if st := s.Status; st.ObservedGeneration < s.Generation || st.UpdatedReplicas != want || st.ReadyReplicas != want {
				pending = append(pending, fmt.Sprintf("%s: %d updated, %d ready of %d replicas", s.Name, st.UpdatedReplicas, st.ReadyReplicas, want))
			}
		}
		return len(pending) == 0, nil
	})
	if err != nil {
		t.Fatalf("after tilt ci, not every StatefulSet ready (%v):\n  %s\n%s", err, strings.Join(pending, "\n  "), c.describe(t))
	}
}

// manifestExists asks the registry for repo:tag, as a node pulling it
// would.
func manifestExists(ctx context.Context, registry, repo, tag string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodHead, fmt.Sprintf("http://%s/v2/%s/manifests/%s", registry, repo, tag), nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/vnd.oci.image.index.v1+json, application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.v2+json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("the registry answers %s for it", resp.Status)
	}
	return nil
}
