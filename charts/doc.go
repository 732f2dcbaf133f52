// Package charts holds the Helm charts of the platform's services (one folder
// per service, plus the shared library chart) and the tests that prove them:
// helm lint in strict mode, strict decoding of every rendered object into its
// Kubernetes API type (case-sensitive, as the API server decodes), security,
// probe, shutdown-timing and disruption settings, who the NetworkPolicy
// admits to the API port and to the metrics port, what it lets each
// service reach (egress_test.go: DNS, its callees, its data stores, and
// the internet less the private ranges for the webhook service alone,
// against ../services.yaml), and that each chart sets
// exactly the environment variables its service reads. Charts are rendered
// against the oldest Kubernetes their kubeVersion admits. The tests also
// strict-decode the development manifests under ../k8s, check the Kafka
// KRaft settings against each other, and check that the Tiltfile matches the
// charts and that the helm it runs (../tilt/helm.sh, the helm module version
// pinned in go.mod) renders what the tests validated. tilt_test.go runs the
// Tiltfile with `tilt ci` against a control plane on loopback, pushing the
// images to a registry on loopback, until every resource is ready.
//
// Adding a service: copy a chart folder and adjust its values, declare the
// service in ../services.yaml and run `make generate`, which lists its
// server.Config in services_gen_test.go (docs/conventions.md).
package charts
