// Package loopbacktest finds loopback addresses for tests that start
// servers by address rather than on a listener they are handed.
package loopbacktest

import (
	"net"
	"testing"
)

// FreeAddr returns a loopback address whose port was free a moment ago.
func FreeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
