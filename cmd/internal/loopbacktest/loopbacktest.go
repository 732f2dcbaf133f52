// Package loopbacktest finds loopback addresses for tests that start
// servers by address rather than on a listener they are handed.
package loopbacktest

import (
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
)

// FreeAddr returns a loopback address whose port was free a moment ago,
// chosen below the kernel's ephemeral range: a port the kernel hands out
// for ":0" can be taken by another test package's server between this
// check and the service binding it, and that server would then answer the
// service's readiness probe. Ports below the range are never handed out
// that way, so only another FreeAddr could take one, drawn at random from
// thousands.
func FreeAddr(t testing.TB) string {
	t.Helper()
	low := ephemeralLow()
	for range 100 {
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(lowestPort+rand.IntN(low-lowestPort)))
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			continue // taken: draw again
		}
		ln.Close()
		return addr
	}
	t.Fatalf("no free loopback port between %d and %d", lowestPort, low)
	return ""
}

// lowestPort keeps clear of the well-known ports and of the usual ones of
// local servers (Postgres 5432, Redis 6379, make run's 8080 to 8082).
const lowestPort = 10000

// ephemeralLow is the first port of the kernel's ephemeral range, where
// ":0" listeners and outgoing connections get theirs (Linux's default is
// 32768).
func ephemeralLow() int {
	const linuxDefault = 32768
	raw, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return linuxDefault
	}
	fields := strings.Fields(string(raw))
	if len(fields) == 0 {
		return linuxDefault
	}
	low, err := strconv.Atoi(fields[0])
	if err != nil || low <= lowestPort+1000 {
		return linuxDefault
	}
	return low
}
