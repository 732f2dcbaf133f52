// Package charts holds the Helm charts of the platform's services (one folder
// per service, plus the shared library chart) and the tests that prove them:
// helm lint in strict mode, strict decoding of every rendered object into its
// Kubernetes API type, security and probe settings, and that each chart sets
// exactly the environment variables its service reads. The tests also
// strict-decode the development manifests under ../k8s.
//
// Adding a service: copy a chart folder, adjust its values, and add the
// service's server.Config to services in charts_test.go.
package charts
