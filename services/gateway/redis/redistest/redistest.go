// Package redistest points tests at the real Redis they run against.
package redistest

import "os"

// URL is the Redis of the test run: TEST_REDIS_URL, or the local server
// that `make test` expects.
func URL() string {
	if u := os.Getenv("TEST_REDIS_URL"); u != "" {
		return u
	}
	return "redis://127.0.0.1:6379/0"
}
