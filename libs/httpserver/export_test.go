package httpserver

import "time"

// SetIOTimeouts shortens the server's read and write deadlines for a test,
// until the returned func restores them.
func SetIOTimeouts(read, write time.Duration) (restore func()) {
	oldRead, oldWrite := readTimeout, writeTimeout
	readTimeout, writeTimeout = read, write
	return func() { readTimeout, writeTimeout = oldRead, oldWrite }
}

// ServeWithMetrics serves on listeners a test made, as ListenAndServe does
// with METRICS_ADDR set.
var ServeWithMetrics = serveWithMetrics
