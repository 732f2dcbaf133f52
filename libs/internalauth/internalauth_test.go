package internalauth_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/esimplatform/esim/libs/internalauth"
)

// serve protects a handler that records the caller it was given, and
// returns the server and a pointer to what it saw.
func serve(t *testing.T, callers internalauth.Callers, policy internalauth.Policy) (*httptest.Server, *[]internalauth.Caller) {
	t.Helper()
	var seen []internalauth.Caller
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, _ := internalauth.CallerFrom(r.Context())
		seen = append(seen, c)
		w.WriteHeader(http.StatusOK)
	})
	srv := httptest.NewServer(internalauth.Protect(prefixed{next}, callers, policy, slog.New(slog.DiscardHandler)))
	t.Cleanup(srv.Close)
	return srv, &seen
}

// prefixed serves the methods of one Twirp service, as generated servers do.
type prefixed struct{ http.Handler }

func (prefixed) PathPrefix() string { return "/twirp/esim.accounts.v1.Accounts/" }

func call(t *testing.T, hc *http.Client, url string, header ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, url, strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range header {
		req.Header.Add("Authorization", h)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == http.StatusOK {
		return resp.StatusCode, ""
	}
	var twerr struct {
		Code string `json:"code"`
		Msg  string `json:"msg"`
	}
	if err := json.Unmarshal(body, &twerr); err != nil {
		t.Fatalf("status %d, body not a Twirp error: %s", resp.StatusCode, body)
	}
	return resp.StatusCode, twerr.Code
}

func TestProtectRefusesAndAdmits(t *testing.T) {
	gatewayToken, operatorToken := internalauth.NewToken(), internalauth.NewToken()
	rotated := internalauth.NewToken()
	callers := internalauth.MustCallers(
		internalauth.Entry(internalauth.Gateway, gatewayToken),
		internalauth.Entry(internalauth.Operator, operatorToken),
		internalauth.Entry(internalauth.Operator, rotated),
	)
	srv, seen := serve(t, callers, internalauth.Policy{
		"Authenticate": {internalauth.Gateway},
		"CreateKey":    {internalauth.Operator},
	})
	const prefix = "/twirp/esim.accounts.v1.Accounts/"

	cases := []struct {
		name     string
		method   string
		header   []string
		status   int
		code     string
		wantSeen internalauth.Caller
	}{
		{"no credential", "CreateKey", nil, 401, "unauthenticated", ""},
		{"unknown token", "CreateKey", []string{"Bearer " + internalauth.NewToken()}, 401, "unauthenticated", ""},
		{"a hash for a token", "CreateKey", []string{"Bearer " + internalauth.Hash(operatorToken)}, 401, "unauthenticated", ""},
		{"other scheme", "CreateKey", []string{"Basic " + operatorToken}, 401, "unauthenticated", ""},
		{"two headers", "CreateKey", []string{"Bearer " + operatorToken, "Bearer " + operatorToken}, 401, "unauthenticated", ""},
		{"caller without permission", "CreateKey", []string{"Bearer " + gatewayToken}, 403, "permission_denied", ""},
		{"method without a rule", "DeleteEverything", []string{"Bearer " + operatorToken}, 403, "permission_denied", ""},
		{"allowed", "CreateKey", []string{"Bearer " + operatorToken}, 200, "", internalauth.Operator},
		{"allowed, rotated token", "CreateKey", []string{"bearer " + rotated}, 200, "", internalauth.Operator},
		{"allowed gateway", "Authenticate", []string{"Bearer " + gatewayToken}, 200, "", internalauth.Gateway},
		// Not this service's: left to it, which answers bad_route.
		{"another service's method, no credential", "/twirp/esim.wallet.v1.Wallet/Debit", nil, 200, "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := len(*seen)
			path := prefix + tc.method
			if strings.HasPrefix(tc.method, "/") {
				path = tc.method
			}
			status, code := call(t, srv.Client(), srv.URL+path, tc.header...)
			if status != tc.status || code != tc.code {
				t.Fatalf("got %d %q, want %d %q", status, code, tc.status, tc.code)
			}
			reached := tc.status == http.StatusOK
			switch {
			case !reached && len(*seen) != before:
				t.Fatal("a refused call reached the handler")
			case reached && (len(*seen) != before+1 || (*seen)[before] != tc.wantSeen):
				t.Fatalf("handler saw %v, want caller %s", (*seen)[before:], tc.wantSeen)
			}
		})
	}
}

func TestClientSendsItsToken(t *testing.T) {
	token := internalauth.NewToken()
	srv, seen := serve(t, internalauth.MustCallers(internalauth.Entry(internalauth.Ordering, token)),
		internalauth.Policy{"Debit": {internalauth.Ordering}})
	hc := internalauth.Client(srv.Client(), token)
	if status, code := call(t, hc, srv.URL+"/twirp/esim.accounts.v1.Accounts/Debit"); status != 200 {
		t.Fatalf("got %d %s", status, code)
	}
	if len(*seen) != 1 || (*seen)[0] != internalauth.Ordering {
		t.Fatalf("handler saw %v", *seen)
	}
	// The client it was made from is unchanged.
	if status, _ := call(t, srv.Client(), srv.URL+"/twirp/esim.accounts.v1.Accounts/Debit"); status != 401 {
		t.Fatalf("the original client got %d, want 401", status)
	}
}

func TestParseCallers(t *testing.T) {
	hash := internalauth.Hash("x")
	good := "gateway:" + hash + ", operator:" + hash
	c, err := internalauth.ParseCallers(good)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.String(); got != "gateway,operator" {
		t.Errorf("String() = %q: want the names only", got)
	}
	for _, bad := range []string{"", " , ", "gateway", "gateway:" + hash[:63], "gateway:" + hash + "00", "Gateway:" + hash, "gateway:" + strings.ToUpper(hash[:62]) + "zz", ":" + hash} {
		_, err := internalauth.ParseCallers(bad)
		if err == nil {
			t.Errorf("ParseCallers(%q) accepted it", bad)
			continue
		}
		if strings.Contains(err.Error(), hash[:16]) {
			t.Errorf("ParseCallers(%q): the error quotes the hash: %v", bad, err)
		}
	}
}

func TestPolicyCheck(t *testing.T) {
	p := internalauth.Policy{"A": {internalauth.Operator}, "Gone": {internalauth.Operator}}
	err := p.Check([]string{"A", "B"})
	if err == nil || !strings.Contains(err.Error(), "method B has no rule") || !strings.Contains(err.Error(), "rule for Gone") {
		t.Fatalf("Check: %v", err)
	}
	if err := (internalauth.Policy{"A": nil}).Check([]string{"A"}); err != nil {
		t.Fatalf("a method nobody may call, said so, is a rule: %v", err)
	}
}
