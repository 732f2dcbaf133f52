package httpserver_test

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/esimplatform/esim/libs/httpserver"
	"github.com/esimplatform/esim/libs/httpserver/httpservertest"
	"github.com/esimplatform/esim/libs/telemetry"
	"github.com/esimplatform/esim/libs/telemetry/telemetrytest"
)

func TestInternalHost(t *testing.T) {
	allowed := []string{"accounts.internal.example.com", "Catalogue.Internal.Example.com."}
	for host, want := range map[string]bool{
		"127.0.0.1:8081":                        true,
		"[::1]:8081":                            true,
		"10.244.0.7:8080":                       true,
		"localhost:8081":                        true,
		"LOCALHOST":                             true,
		"accounts":                              true,
		"accounts:80":                           true,
		"accounts.esim.svc":                     true,
		"accounts.esim.svc.cluster.local:80":    true,
		"accounts.esim.svc.cluster.local.":      true,
		"accounts.internal.example.com":         true,
		"catalogue.internal.example.com":        true,
		"catalogue.internal.example.com.:8082":  true,
		"Accounts.Internal.Example.com:443":     true,
		"":                                      false,
		"attacker.example":                      false,
		"rebind.attacker.example:8081":          false,
		"accounts.svc.attacker.example":         false,
		"a.b.svc.attacker.example":              false,
		"svc.attacker.example":                  false,
		"accounts.esim.svc.cluster.local.evil":  false,
		"localhost.attacker.example":            false,
		"internal.example.com":                  false,
		"accounts.internal.example.com.evil.io": false,
	} {
		if got := httpserver.InternalHost(host, allowed); got != want {
			t.Errorf("InternalHost(%q) = %v, want %v", host, got, want)
		}
	}
}

// A web page whose name rebinds to 127.0.0.1 reaches an internal service
// through an operator's port-forward with its own name as Host: it gets
// nothing. The public gateway is reached by any name and checks keys.
func TestInternalServicesRefuseForeignHosts(t *testing.T) {
	var logs telemetrytest.LogBuffer
	tel := &telemetry.Telemetry{Logger: slog.New(slog.NewJSONHandler(&logs, nil))}
	var called int
	app := http.HandlerFunc(func(http.ResponseWriter, *http.Request) { called++ })
	for _, tc := range []struct {
		name   string
		routes httpserver.Routes
		host   string
		want   int
	}{
		{"internal, loopback", httpserver.Routes{App: app, Telemetry: tel}, "127.0.0.1:8081", http.StatusOK},
		{"internal, foreign name", httpserver.Routes{App: app, Telemetry: tel}, "rebind.attacker.example:8081", http.StatusMisdirectedRequest},
		{"internal, foreign name on a probe", httpserver.Routes{App: app, Telemetry: tel}, "rebind.attacker.example", http.StatusMisdirectedRequest},
		{"internal, an allowed name", httpserver.Routes{App: app, Telemetry: tel, AllowedHosts: []string{"accounts.example.com"}}, "accounts.example.com", http.StatusOK},
		{"public, any name", httpserver.Routes{App: app, Telemetry: tel, Public: true}, "api.esim.example", http.StatusOK},
		// A page served on the operator's own network under a name that
		// passes (mDNS answers .local names) still sends an Origin.
		{"internal, a browser's request", httpserver.Routes{App: app, Telemetry: tel}, "accounts.esim.svc.cluster.local", http.StatusMisdirectedRequest},
		{"public, a browser's request", httpserver.Routes{App: app, Telemetry: tel, Public: true}, "api.esim.example", http.StatusOK},
		// A page on another local port: its GET carries no Origin, but
		// browsers send Sec-Fetch-Site to loopback addresses.
		{"internal, a page's GET of a probe", httpserver.Routes{App: app, Telemetry: tel}, "localhost:8081", http.StatusMisdirectedRequest},
		// A person opening the address: "none".
		{"internal, a typed-in GET of a probe", httpserver.Routes{App: app, Telemetry: tel}, "localhost:8081", http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			called = 0
			srv := httptest.NewServer(httpserver.Handler(tc.routes))
			defer srv.Close()
			method, path := http.MethodPost, "/twirp/accounts.v1.Accounts/CreateKey"
			if strings.Contains(tc.name, "probe") {
				method, path = http.MethodGet, "/readyz"
			}
			req, _ := http.NewRequest(method, srv.URL+path, nil)
			req.Host = tc.host
			switch {
			case strings.Contains(tc.name, "browser"):
				req.Header.Set("Origin", "http://"+tc.host)
				req.Header.Set("Sec-Fetch-Site", "same-origin")
			case strings.Contains(tc.name, "page's GET"):
				req.Header.Set("Sec-Fetch-Site", "same-site")
			case strings.Contains(tc.name, "typed-in"):
				req.Header.Set("Sec-Fetch-Site", "none")
			}
			status, header, body := httpservertest.Exchange(t, req)
			if status != tc.want {
				t.Fatalf("%s Host %q: %d %s, want %d", path, tc.host, status, body, tc.want)
			}
			if tc.want == http.StatusMisdirectedRequest {
				if called != 0 {
					t.Error("the app ran for a refused Host")
				}
				// In Twirp's error shape, so esimctl shows why.
				var twirpErr struct{ Code, Msg string }
				if err := json.Unmarshal([]byte(body), &twirpErr); err != nil || twirpErr.Code != "permission_denied" || twirpErr.Msg == "" {
					t.Errorf("refusal %s is not a Twirp permission_denied error with a message", body)
				}
				if header.Get("Request-Id") == "" {
					t.Error("refusal without a Request-Id")
				}
				if !strings.Contains(tc.name, "browser") && !strings.Contains(tc.name, "page") && !strings.Contains(twirpErr.Msg, "ALLOWED_HOSTS") {
					t.Errorf("refusal %q does not say how to allow the name", twirpErr.Msg)
				}
				if !strings.Contains(logs.String(), `"host":"`+tc.host+`"`) {
					t.Errorf("the refusal is not logged with the Host; logs:\n%s", logs.String())
				}
			} else if path != "/readyz" && called != 1 {
				t.Errorf("the app ran %d times, want once", called)
			}
		})
	}
}

func TestAllowedHostsAreBareNames(t *testing.T) {
	if err := httpserver.CheckAllowedHosts([]string{"accounts.internal.example.com", "accounts"}); err != nil {
		t.Errorf("bare names refused: %v", err)
	}
	for _, bad := range []string{"", ".", "accounts.example.com:8081", "http://accounts.example.com", "accounts.example.com/", " accounts", "*.example.com", ".example.com", "a..example.com"} {
		if err := httpserver.CheckAllowedHosts([]string{bad}); err == nil || !strings.Contains(err.Error(), "ALLOWED_HOSTS") {
			t.Errorf("CheckAllowedHosts(%q) = %v, want it refused", bad, err)
		}
	}
}
