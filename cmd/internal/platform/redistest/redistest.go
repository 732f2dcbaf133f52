// Package redistest points the cmd module's tests at the Redis of the test
// run. It reads TEST_REDIS_URL as services/gateway/redis/redistest does; it
// is not imported from there because the cmd module does not depend on the
// gateway module, and would then build only inside the workspace.
package redistest

import "os"

// URL is the Redis of the test run: TEST_REDIS_URL, or database 2 of the
// local server that `make test` expects: never make run's 0, whose sign-in
// counters for the demo user (a mistyped password) would refuse the demo
// user these tests sign in as, nor the portal tests' 1.
func URL() string {
	if u := os.Getenv("TEST_REDIS_URL"); u != "" {
		return u
	}
	return "redis://127.0.0.1:6379/2"
}
