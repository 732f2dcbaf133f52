// Package httpservertest holds what tests of the services' HTTP servers
// share.
package httpservertest

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// Get sends GET url and returns the answer's status and body; a request
// that gets no answer fails the test.
func Get(t testing.TB, url string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	return Do(t, req)
}

// Do sends req and returns the answer's status and body; a request that
// gets no answer fails the test.
func Do(t testing.TB, req *http.Request) (int, string) {
	t.Helper()
	status, _, body := Exchange(t, req)
	return status, body
}

// Exchange is Do with the answer's header too.
func Exchange(t testing.TB, req *http.Request) (int, http.Header, string) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	return read(t, resp, req.Method+" "+req.URL.String())
}

// RawExchange writes request, as it stands, on a new connection to addr
// and reads the answer: for requests net/http's client will not send,
// such as the request target "*".
func RawExchange(t testing.TB, addr, request string) (int, http.Header, string) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, request); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("%q to %s: %v", request, addr, err)
	}
	return read(t, resp, request)
}

func read(t testing.TB, resp *http.Response, what string) (int, http.Header, string) {
	t.Helper()
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s: reading the answer: %v", what, err)
	}
	return resp.StatusCode, resp.Header, string(body)
}

// Returned waits for a server's run (or serve) function, told to stop,
// to return on done: nil within the given time, or the test fails.
func Returned(t testing.TB, done <-chan error, within time.Duration) {
	t.Helper()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("returned %v after it was told to stop", err)
		}
	case <-time.After(within):
		t.Fatalf("did not return within %s of being told to stop", within)
	}
}
