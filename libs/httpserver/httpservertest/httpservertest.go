// Package httpservertest holds what tests of the services' HTTP servers
// share.
package httpservertest

import (
	"io"
	"net/http"
	"testing"
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
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading the answer: %v", req.Method, req.URL, err)
	}
	return resp.StatusCode, string(body)
}
