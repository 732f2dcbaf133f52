package loopbacktest

import (
	"net"
	"strconv"
	"testing"
)

// The address is free, and its port below the kernel's ephemeral range,
// where no ":0" listener can be given it.
func TestFreeAddrIsBelowTheEphemeralRange(t *testing.T) {
	low := ephemeralLow()
	for range 20 {
		addr := FreeAddr(t)
		_, port, err := net.SplitHostPort(addr)
		if err != nil {
			t.Fatal(err)
		}
		if n, _ := strconv.Atoi(port); n < lowestPort || n >= low {
			t.Fatalf("%s: port outside [%d, %d)", addr, lowestPort, low)
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatalf("%s is not free: %v", addr, err)
		}
		ln.Close()
	}
}
