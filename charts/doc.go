// Package charts holds the Helm charts of the platform's services (one folder
// per service, plus the shared library chart) and the tests that prove them:
// helm lint in strict mode, strict decoding of every rendered object into its
// Kubernetes API type (case-sensitive, as the API server decodes), security,
// probe, shutdown-timing and disruption settings, who the NetworkPolicy
// admits to the API port and to the metrics port, and that each chart sets
// exactly the environment variables its service reads. Charts are rendered
// against the oldest Kubernetes their kubeVersion admits. The tests also
// strict-decode the development manifests under ../k8s, check the Kafka
// KRaft settings against each other, and check that the Tiltfile matches the
// charts and that the helm it runs (../tilt/helm.sh, the helm module version
// pinned in go.mod) renders what the tests validated.
//
// Adding a service: copy a chart folder, adjust its values, add the
// service's server.Config to services in charts_test.go and the service to
// SERVICES in the Tiltfile.
package charts
