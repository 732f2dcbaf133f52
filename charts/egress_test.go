package charts

import (
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// The ports of what the services use besides each other (services.yaml's
// database and redis); Kafka's is read from KAFKA_BROKERS.
const (
	postgresPort = 5432
	redisPort    = 6379
)

// internetCharts may reach the internet: the webhook service delivers to
// partners' endpoints, on 443 alone.
var internetCharts = []string{"webhook"}

// privateRanges are where the cluster's pods, nodes and Services may live,
// and what a rule open to the internet must leave out: the private, shared
// (CGNAT), link-local (the clouds' metadata service) and loopback ranges.
var privateRanges = []netip.Prefix{
	netip.MustParsePrefix("10.0.0.0/8"),
	netip.MustParsePrefix("172.16.0.0/12"),
	netip.MustParsePrefix("192.168.0.0/16"),
	netip.MustParsePrefix("100.64.0.0/10"),
	netip.MustParsePrefix("169.254.0.0/16"),
	netip.MustParsePrefix("127.0.0.0/8"),
	netip.MustParsePrefix("fc00::/7"),
	netip.MustParsePrefix("fe80::/10"),
	netip.MustParsePrefix("::1/128"),
}

// egressTarget is one chart's rendering as its callers see it: its pods'
// labels, their ports and the Service in front of them.
type egressTarget struct {
	pods  labels.Set
	ports map[string]int32
	svc   *corev1.Service
	d     *appsv1.Deployment
	np    *networkingv1.NetworkPolicy
}

// listenerRef is services.yaml's ${<service>.<VAR>}: the address of a
// further listener of that service, which the entry reaches.
var listenerRef = regexp.MustCompile(`\$\{([a-z0-9-]+)\.([A-Z0-9_]+)\}`)

// TestEgress renders every chart as installed (values.yaml) and as in
// development (values-dev.yaml, with the policy turned on there too) and
// holds each service's egress to services.yaml: it reaches DNS, the
// services it calls on their http port and every service its URLs name,
// its database, Redis or Kafka exactly when it uses them, no port of a
// service it does not call (nor a further listener its entry names no
// address of), and the internet only where internetCharts says, never
// the private ranges.
func TestEgress(t *testing.T) {
	for _, vf := range valuesFiles {
		t.Run(vf, func(t *testing.T) {
			targets := map[string]egressTarget{}
			for _, c := range applicationCharts(t) {
				vals := overrides(t, c, vf)
				np, _ := vals["networkPolicy"].(map[string]any)
				if np == nil {
					np = map[string]any{}
					vals["networkPolicy"] = np
				}
				np["enabled"] = true
				out, err := renderChart(c, vals)
				if err != nil {
					t.Fatalf("render %s: %v", c, err)
				}
				d, objs := deploymentOf(t, decodeRendered(t, out))
				tg := egressTarget{pods: labels.Set(d.Spec.Template.Labels), ports: containerPorts(d.Spec.Template.Spec.Containers[0]), d: d}
				for _, o := range objs {
					switch o := o.(type) {
					case *corev1.Service:
						tg.svc = o
					case *networkingv1.NetworkPolicy:
						tg.np = o
					}
				}
				if tg.svc == nil || tg.np == nil {
					t.Fatalf("%s: want a Service and a NetworkPolicy", c)
				}
				targets[c] = tg
			}
			for _, s := range declared(t) {
				t.Run(s.Name, func(t *testing.T) {
					checkEgress(t, s, targets)
				})
			}
		})
	}
}

func checkEgress(t *testing.T, s declaredService, targets map[string]egressTarget) {
	self := targets[s.Name]
	np := self.np
	if !slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeEgress) {
		t.Fatalf("NetworkPolicy %s: policyTypes %v lack Egress: its egress rules would be ignored", np.Name, np.Spec.PolicyTypes)
	}
	rules := np.Spec.Egress
	for i, rule := range rules {
		if len(rule.To) == 0 || len(rule.Ports) == 0 {
			t.Errorf("egress rule %d (%v to %v) admits every destination or every port", i+1, rule.Ports, rule.To)
		}
		for _, p := range rule.Ports {
			if p.Port == nil {
				t.Errorf("egress rule %d admits every port of %v", i+1, rule.To)
			}
		}
	}

	// What services.yaml lets it reach: the http port of each service it
	// calls, and the listeners its entry names the address of.
	allowed := map[string][]string{}
	for _, callee := range s.Calls {
		allowed[callee] = append(allowed[callee], "http")
	}
	for _, v := range s.Env {
		for _, m := range listenerRef.FindAllStringSubmatch(v, -1) {
			if tg, ok := targets[m[1]]; ok {
				if name := listenerPort(tg, m[2]); name != "" {
					allowed[m[1]] = append(allowed[m[1]], name)
				}
			}
		}
	}
	for name, tg := range targets {
		for port, number := range tg.ports {
			if slices.Contains(allowed[name], port) {
				continue
			}
			for i, rule := range rules {
				if egressAdmits(rule, corev1.ProtocolTCP, port, number) && mayReachPods(rule.To, tg.pods) {
					t.Errorf("egress rule %d reaches %s's port %s, which %s does not call (services.yaml)", i+1, name, port, s.Name)
				}
			}
		}
	}

	// What it must reach: each callee's http port, and the port of every
	// service one of its URLs names.
	must := map[string][]string{}
	for _, callee := range s.Calls {
		must[callee] = append(must[callee], "http")
	}
	for k, v := range envOf(self.d.Spec.Template.Spec.Containers[0]) {
		if !strings.HasSuffix(k, "_URL") {
			continue
		}
		if name, port := urlTarget(v, targets); name != "" {
			must[name] = append(must[name], port)
		}
	}
	if len(s.Calls) > 0 && len(must) == 0 {
		t.Fatal("calls services but names none: nothing checked")
	}
	for name, ports := range must {
		tg, ok := targets[name]
		if !ok {
			t.Errorf("calls %s, which is no chart", name)
			continue
		}
		for _, port := range ports {
			if !slices.ContainsFunc(rules, func(rule networkingv1.NetworkPolicyEgressRule) bool {
				return egressAdmits(rule, corev1.ProtocolTCP, port, tg.ports[port]) && slices.ContainsFunc(rule.To, func(peer networkingv1.NetworkPolicyPeer) bool {
					return peer.IPBlock == nil && peer.NamespaceSelector == nil && selects(peer.PodSelector, tg.pods)
				})
			}) {
				t.Errorf("no egress rule reaches %s's port %s (%d), which %s calls", name, port, tg.ports[port], s.Name)
			}
		}
	}

	dns := labels.Set{"k8s-app": "kube-dns"}
	for _, proto := range []corev1.Protocol{corev1.ProtocolUDP, corev1.ProtocolTCP} {
		if !slices.ContainsFunc(rules, func(rule networkingv1.NetworkPolicyEgressRule) bool {
			return egressAdmits(rule, proto, "", 53) && slices.ContainsFunc(rule.To, func(peer networkingv1.NetworkPolicyPeer) bool {
				return nsMayBe(peer.NamespaceSelector, "kube-system") && selects(peer.PodSelector, dns)
			})
		}) {
			t.Errorf("no egress rule reaches kube-dns on %s 53", proto)
		}
	}

	kafkaPort := int32(9092)
	if brokers := envOf(self.d.Spec.Template.Spec.Containers[0])["KAFKA_BROKERS"]; brokers != "" {
		p, err := portOf(strings.Split(brokers, ",")[0])
		if err != nil {
			t.Fatalf("KAFKA_BROKERS %q: %v", brokers, err)
		}
		kafkaPort = p
	}
	for _, use := range []struct {
		what string
		uses bool
		port int32
	}{
		{"its database", s.Database, postgresPort},
		{"Redis", s.Redis, redisPort},
		{"Kafka", s.Kafka, kafkaPort},
	} {
		reached := slices.ContainsFunc(rules, func(rule networkingv1.NetworkPolicyEgressRule) bool {
			return len(rule.To) > 0 && egressAdmits(rule, corev1.ProtocolTCP, "", use.port)
		})
		if reached != use.uses {
			t.Errorf("reaches %s (port %d): %v, uses it (services.yaml): %v", use.what, use.port, reached, use.uses)
		}
	}

	checkInternet(t, s.Name, rules)
}

// checkInternet: the charts of internetCharts reach the internet on 443
// alone, IPv4 and IPv6, with every private range left out; no other chart
// has an address block outside the private ranges.
func checkInternet(t *testing.T, name string, rules []networkingv1.NetworkPolicyEgressRule) {
	internet := slices.Contains(internetCharts, name)
	wholes := map[string]bool{}
	for i, rule := range rules {
		for _, peer := range rule.To {
			if peer.IPBlock == nil {
				continue
			}
			cidr, err := netip.ParsePrefix(peer.IPBlock.CIDR)
			if err != nil {
				t.Errorf("egress rule %d: ipBlock %q: %v", i+1, peer.IPBlock.CIDR, err)
				continue
			}
			if !slices.ContainsFunc(privateRanges, func(p netip.Prefix) bool { return p.Bits() <= cidr.Bits() && p.Contains(cidr.Addr()) }) {
				if !internet {
					t.Errorf("egress rule %d reaches %s, outside the private ranges: only %v reach the internet", i+1, cidr, internetCharts)
					continue
				}
				if len(rule.Ports) != 1 || !egressAdmits(rule, corev1.ProtocolTCP, "", 443) || rule.Ports[0].EndPort != nil {
					t.Errorf("egress rule %d reaches the internet on %v, want 443 alone", i+1, rule.Ports)
				}
				if cidr.Bits() == 0 {
					wholes[cidr.String()] = true
				}
				for _, p := range privateRanges {
					if cidr.Overlaps(p) && !excepted(peer.IPBlock.Except, p) {
						t.Errorf("egress rule %d reaches %s without excepting %s", i+1, cidr, p)
					}
				}
			}
		}
	}
	if internet && (!wholes["0.0.0.0/0"] || !wholes["::/0"]) {
		t.Errorf("reaches the internet at %v, want 0.0.0.0/0 and ::/0 (less private ranges)", wholes)
	}
}

// listenerPort names the container port of a further listener: the one its
// variable (an extraPorts env) listens on.
func listenerPort(tg egressTarget, variable string) string {
	addr, ok := envOf(tg.d.Spec.Template.Spec.Containers[0])[variable]
	if !ok {
		return ""
	}
	number, err := portOf(addr)
	if err != nil {
		return ""
	}
	for name, n := range tg.ports {
		if n == number {
			return name
		}
	}
	return ""
}

// urlTarget is the chart and container port a URL reaches when its host is
// a chart's Service name: the Service port's target.
func urlTarget(raw string, targets map[string]egressTarget) (chart, port string) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", ""
	}
	tg, ok := targets[u.Hostname()]
	if !ok || tg.svc.Name != u.Hostname() {
		return "", ""
	}
	number := map[string]int32{"http": 80, "https": 443}[u.Scheme]
	if p := u.Port(); p != "" {
		n, err := strconv.ParseInt(p, 10, 32)
		if err != nil {
			return "", ""
		}
		number = int32(n)
	}
	for _, sp := range tg.svc.Spec.Ports {
		if sp.Port == number {
			return u.Hostname(), sp.TargetPort.String()
		}
	}
	return u.Hostname(), fmt.Sprintf("(no Service port %d)", number)
}

// portOf is the port of host:port (":8443" too).
func portOf(addr string) (int32, error) {
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseUint(p, 10, 16)
	return int32(n), err
}

// egressAdmits reports whether an egress rule admits a destination port of
// that protocol, name (may be empty) and number: a rule without ports, or a
// port entry without a port, admits them all.
func egressAdmits(rule networkingv1.NetworkPolicyEgressRule, proto corev1.Protocol, name string, number int32) bool {
	if len(rule.Ports) == 0 {
		return true
	}
	for _, p := range rule.Ports {
		if p.Protocol != nil && *p.Protocol != proto || p.Protocol == nil && proto != corev1.ProtocolTCP {
			continue
		}
		switch {
		case p.Port == nil:
			return true
		case p.Port.Type == intstr.String && name != "" && p.Port.StrVal == name:
			return true
		case p.Port.Type == intstr.Int && (p.Port.IntVal == number || p.EndPort != nil && p.Port.IntVal <= number && number <= *p.EndPort):
			return true
		}
	}
	return false
}

// mayReachPods reports whether any of the peers (none: every destination)
// may be a pod with these labels in the release namespace. Pod addresses
// are not known when rendering, so an address block may hold the pods
// unless it leaves out every private range.
func mayReachPods(peers []networkingv1.NetworkPolicyPeer, pods labels.Set) bool {
	if len(peers) == 0 {
		return true
	}
	for _, peer := range peers {
		if peer.IPBlock != nil {
			cidr, err := netip.ParsePrefix(peer.IPBlock.CIDR)
			if err != nil || slices.ContainsFunc(privateRanges, func(p netip.Prefix) bool {
				return cidr.Overlaps(p) && !excepted(peer.IPBlock.Except, p)
			}) {
				return true
			}
			continue
		}
		ns := peer.NamespaceSelector == nil || nsMayBe(peer.NamespaceSelector, namespace)
		pod := peer.PodSelector == nil || selects(peer.PodSelector, pods)
		if ns && pod {
			return true
		}
	}
	return false
}

// nsMayBe reports whether a namespace selector may pick the namespace of
// that name: the only label of it known here is its name, so a selector
// picks it unless it asks for another name.
func nsMayBe(sel *metav1.LabelSelector, name string) bool {
	if sel == nil {
		return false
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return true
	}
	reqs, _ := s.Requirements()
	for _, r := range reqs {
		if r.Key() == "kubernetes.io/metadata.name" && !r.Matches(labels.Set{r.Key(): name}) {
			return false
		}
	}
	return true
}

// excepted reports whether one of the except blocks holds all of p.
func excepted(except []string, p netip.Prefix) bool {
	return slices.ContainsFunc(except, func(e string) bool {
		ep, err := netip.ParsePrefix(e)
		return err == nil && ep.Bits() <= p.Bits() && ep.Contains(p.Addr())
	})
}

// TestEgressOptOut: networkPolicy.egress.enabled false leaves egress open
// (the policy governs ingress alone) while ingress keeps its rules.
func TestEgressOptOut(t *testing.T) {
	out, err := renderChart("ordering", map[string]any{"networkPolicy": map[string]any{"egress": map[string]any{"enabled": false}}})
	if err != nil {
		t.Fatal(err)
	}
	_, objs := deploymentOf(t, decodeRendered(t, out))
	np, _ := objs["*v1.NetworkPolicy/ordering"].(*networkingv1.NetworkPolicy)
	if np == nil {
		t.Fatal("no NetworkPolicy")
	}
	if !slices.Equal(np.Spec.PolicyTypes, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}) || len(np.Spec.Egress) != 0 || len(np.Spec.Ingress) == 0 {
		t.Errorf("egress off: policyTypes %v, %d egress and %d ingress rules; want Ingress alone with its rules", np.Spec.PolicyTypes, len(np.Spec.Egress), len(np.Spec.Ingress))
	}
}

// TestEgressPeers: a peer of values reaches what its "to" names on its
// ports; with an empty "to" it renders no rule, never one open to every
// destination; without ports the chart refuses it.
func TestEgressPeers(t *testing.T) {
	smdp := func(peer map[string]any) (*networkingv1.NetworkPolicy, error) {
		out, err := renderChart("ordering", map[string]any{"networkPolicy": map[string]any{"egress": map[string]any{"peers": map[string]any{"smdp": peer}}}})
		if err != nil {
			return nil, err
		}
		_, objs := deploymentOf(t, decodeRendered(t, out))
		return objs["*v1.NetworkPolicy/ordering"].(*networkingv1.NetworkPolicy), nil
	}
	reaches443 := func(np *networkingv1.NetworkPolicy) (cidrs []string) {
		for _, rule := range np.Spec.Egress {
			if egressAdmits(rule, corev1.ProtocolTCP, "", 443) {
				for _, peer := range rule.To {
					if peer.IPBlock != nil {
						cidrs = append(cidrs, peer.IPBlock.CIDR)
					}
				}
				if len(rule.To) == 0 {
					cidrs = append(cidrs, "everything")
				}
			}
		}
		return cidrs
	}
	np, err := smdp(map[string]any{"to": []any{map[string]any{"ipBlock": map[string]any{"cidr": "203.0.113.7/32"}}}})
	if err != nil {
		t.Fatal(err)
	}
	if got := reaches443(np); !slices.Equal(got, []string{"203.0.113.7/32"}) {
		t.Errorf("smdp to 203.0.113.7/32: 443 reaches %v", got)
	}
	np, err = smdp(map[string]any{"to": []any{}})
	if err != nil {
		t.Fatal(err)
	}
	if got := reaches443(np); len(got) != 0 {
		t.Errorf("smdp to nothing: 443 reaches %v, want nothing", got)
	}
	_, err = smdp(map[string]any{"ports": nil, "to": []any{map[string]any{"ipBlock": map[string]any{"cidr": "203.0.113.7/32"}}}})
	if err == nil || !strings.Contains(err.Error(), "networkPolicy.egress.peers.smdp names no ports") {
		t.Errorf("smdp without ports: want the chart to refuse it, got %v", err)
	}
}

// TestExtraPortPeers: a further listener with peers of its own admits
// those alone (ordering's ES2+ listener in development: the simulator,
// not the API's callers); without, it is the API's callers'.
func TestExtraPortPeers(t *testing.T) {
	admitted := func(vals map[string]any) map[string][]networkingv1.NetworkPolicyPeer {
		t.Helper()
		vals["networkPolicy"] = map[string]any{"enabled": true}
		out, err := renderChart("ordering", vals)
		if err != nil {
			t.Fatal(err)
		}
		_, objs := deploymentOf(t, decodeRendered(t, out))
		np := objs["*v1.NetworkPolicy/ordering"].(*networkingv1.NetworkPolicy)
		from := map[string][]networkingv1.NetworkPolicyPeer{}
		for _, rule := range np.Spec.Ingress {
			for _, p := range rule.Ports {
				from[p.Port.String()] = append(from[p.Port.String()], rule.From...)
			}
		}
		return from
	}
	simulator := labels.Set{"app.kubernetes.io/name": "smdp-sim"}
	gateway := labels.Set{"app.kubernetes.io/name": "gateway"}

	from := admitted(overrides(t, "ordering", "values-dev.yaml"))
	if !mayReachPods(from["es2plus"], simulator) || mayReachPods(from["es2plus"], gateway) {
		t.Errorf("dev: es2plus admits %v; want the simulator alone", from["es2plus"])
	}
	if mayReachPods(from["http"], simulator) {
		t.Errorf("dev: the simulator is admitted to the API port")
	}

	from = admitted(map[string]any{"extraPorts": []any{map[string]any{"name": "es2plus", "containerPort": 8443, "env": "ES2PLUS_ADDR"}}, "env": map[string]any{"ES2PLUS_ADDR": nil}})
	if !mayReachPods(from["es2plus"], gateway) || mayReachPods(from["es2plus"], simulator) {
		t.Errorf("without peers of its own: es2plus admits %v; want the API's callers", from["es2plus"])
	}
}
