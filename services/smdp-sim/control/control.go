// Package control is the simulator's control API: tests and operators read
// its state, inject faults and set vendor styles over plain HTTP JSON. Every call must carry
// the bearer token CONTROL_TOKEN: anything else that reaches the port (a
// webhook aimed at loopback, a page in a developer's browser) must not
// wipe or stall the simulator. It is off in production (CONTROL_API).
package control

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/esimplatform/esim/libs/httpserver"
	smdpsim "github.com/esimplatform/esim/services/smdp-sim"
)

// Prefix is where the control API is served.
const Prefix = "/control/"

// faultBody is a fault as the API takes it.
type faultBody struct {
	Function    string `json:"function"`
	ProfileType string `json:"profileType,omitempty"`
	Mode        string `json:"mode"`
	Count       int    `json:"count,omitempty"`
	Skip        int    `json:"skip,omitempty"`
	SubjectCode string `json:"subjectCode,omitempty"`
	ReasonCode  string `json:"reasonCode,omitempty"`
	Message     string `json:"message,omitempty"`
	Hang        string `json:"hang,omitempty"`
}

type installBody struct {
	EID string `json:"eid,omitempty"`
}

type useBody struct {
	Bytes int64 `json:"bytes"`
}

type drainBody struct {
	ProfileType string `json:"profileType"`
}

// vendorBody is a vendor setting as the API takes it.
type vendorBody struct {
	ProfileType         string `json:"profileType"`
	PaddedICCIDs        bool   `json:"paddedICCIDs"`
	ExecutedWithWarning bool   `json:"executedWithWarning"`
	OmitSMDPAddress     bool   `json:"omitSMDPAddress"`
}

// Handler serves the control API of sim under Prefix to callers that
// present token as "Authorization: Bearer <token>"; an empty token admits
// no one.
func Handler(sim *smdpsim.Sim, token []byte) http.Handler {
	mux := http.NewServeMux()
	handle := func(pattern string, h http.HandlerFunc) {
		route := pattern[strings.IndexByte(pattern, ' ')+1:]
		mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
			httpserver.SetRoute(r.Context(), route)
			h(w, r)
		})
	}
	handle("GET /control/state", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, sim.State())
	})
	handle("POST /control/faults", func(w http.ResponseWriter, r *http.Request) {
		var b faultBody
		if !decode(w, r, &b) {
			return
		}
		f := smdpsim.Fault{
			Function: b.Function, ProfileType: b.ProfileType, Mode: b.Mode, Count: b.Count, SkipCount: b.Skip,
			SubjectCode: b.SubjectCode, ReasonCode: b.ReasonCode, Message: b.Message,
		}
		if b.Hang != "" {
			d, err := time.ParseDuration(b.Hang)
			if err != nil {
				writeError(w, http.StatusBadRequest, "hang: want a Go duration such as 2s or 1m30s")
				return
			}
			f.Hang = d
		}
		stored, err := sim.AddFault(f)
		if err != nil {
			writeDomainError(w, err)
			return
		}
		writeJSON(w, http.StatusCreated, stored)
	})
	handle("DELETE /control/faults", func(w http.ResponseWriter, _ *http.Request) {
		sim.ClearFaults()
		w.WriteHeader(http.StatusNoContent)
	})
	handle("POST /control/drain", func(w http.ResponseWriter, r *http.Request) {
		var b drainBody
		if !decode(w, r, &b) {
			return
		}
		if b.ProfileType == "" {
			writeError(w, http.StatusBadRequest, "profileType: required")
			return
		}
		if err := sim.Drain(b.ProfileType); err != nil {
			writeDomainError(w, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	handle("PUT /control/vendor", func(w http.ResponseWriter, r *http.Request) {
		var b vendorBody
		if !decode(w, r, &b) {
			return
		}
		v := smdpsim.Vendor(b)
		if err := sim.SetVendor(v); err != nil {
			writeDomainError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, v)
	})
	handle("POST /control/reset", func(w http.ResponseWriter, _ *http.Request) {
		sim.Reset()
		w.WriteHeader(http.StatusNoContent)
	})
	// The device and the network: a released profile is downloaded and
	// installed (the operator is told over ES2+), attaches and uses data.
	handle("POST /control/profiles/{iccid}/install", func(w http.ResponseWriter, r *http.Request) {
		var b installBody
		if r.ContentLength != 0 && !decode(w, r, &b) {
			return
		}
		res, err := sim.Install(r.Context(), r.PathValue("iccid"), b.EID)
		if err != nil {
			writeDomainError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, res)
	})
	handle("POST /control/profiles/{iccid}/attach", func(w http.ResponseWriter, r *http.Request) {
		d, err := sim.Attach(r.PathValue("iccid"))
		if err != nil {
			writeDomainError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, d)
	})
	handle("POST /control/profiles/{iccid}/use", func(w http.ResponseWriter, r *http.Request) {
		var b useBody
		if !decode(w, r, &b) {
			return
		}
		d, err := sim.Use(r.PathValue("iccid"), b.Bytes)
		if err != nil {
			writeDomainError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, d)
	})
	return requireToken(token, mux)
}

// requireToken answers 401 unless the request presents token. Both sides
// are hashed before the constant-time comparison, so neither the time nor
// the length of a wrong guess says anything about the token.
func requireToken(token []byte, next http.Handler) http.Handler {
	want := sha256.Sum256(token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		presented, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		got := sha256.Sum256([]byte(presented))
		if !ok || len(token) == 0 || subtle.ConstantTimeCompare(got[:], want[:]) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="smdp-sim control"`)
			writeError(w, http.StatusUnauthorized, "authorization: want Authorization: Bearer <CONTROL_TOKEN>")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// decode reads a JSON body strictly: a misspelt field would otherwise
// silently make a broader fault than the test meant.
func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil {
		return true
	}
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &te):
		field := te.Field[strings.LastIndexByte(te.Field, '.')+1:]
		writeError(w, http.StatusBadRequest, fmt.Sprintf("%s: want a %s, not a %s", field, te.Type, te.Value))
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		writeError(w, http.StatusBadRequest, strings.TrimPrefix(err.Error(), "json: ")) // names the field
	default:
		writeError(w, http.StatusBadRequest, "body: not a JSON object: "+err.Error())
	}
	return false
}

func writeDomainError(w http.ResponseWriter, err error) {
	var ve *smdpsim.ValidationError
	switch {
	case errors.As(err, &ve):
		writeError(w, http.StatusBadRequest, ve.Error())
	case errors.Is(err, smdpsim.ErrNotFound), errors.Is(err, smdpsim.ErrUnknownICCID):
		writeError(w, http.StatusNotFound, err.Error())
	case errors.Is(err, smdpsim.ErrNotAllowed):
		writeError(w, http.StatusConflict, err.Error())
	default:
		writeError(w, http.StatusInternalServerError, err.Error())
	}
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"error": msg})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// Client calls a simulator's control API.
type Client struct {
	// BaseURL is the simulator's HTTP address, such as http://127.0.0.1:8080.
	BaseURL string
	// Token is the simulator's CONTROL_TOKEN.
	Token string
	// HTTP is http.DefaultClient when nil.
	HTTP *http.Client
}

// State returns the simulator's state.
func (c *Client) State(ctx context.Context) (smdpsim.State, error) {
	var st smdpsim.State
	err := c.do(ctx, http.MethodGet, "state", nil, http.StatusOK, &st)
	return st, err
}

// AddFault injects f.
func (c *Client) AddFault(ctx context.Context, f smdpsim.Fault) error {
	b := faultBody{
		Function: f.Function, ProfileType: f.ProfileType, Mode: f.Mode, Count: f.Count, Skip: f.SkipCount,
		SubjectCode: f.SubjectCode, ReasonCode: f.ReasonCode, Message: f.Message,
	}
	if f.Hang != 0 {
		b.Hang = f.Hang.String()
	}
	return c.do(ctx, http.MethodPost, "faults", b, http.StatusCreated, nil)
}

// ClearFaults removes every fault.
func (c *Client) ClearFaults(ctx context.Context) error {
	return c.do(ctx, http.MethodDelete, "faults", nil, http.StatusNoContent, nil)
}

// Drain empties the pool of profileType.
func (c *Client) Drain(ctx context.Context, profileType string) error {
	return c.do(ctx, http.MethodPost, "drain", drainBody{ProfileType: profileType}, http.StatusNoContent, nil)
}

// SetVendor sets the vendor style of v.ProfileType's answers (every
// setting off: none).
func (c *Client) SetVendor(ctx context.Context, v smdpsim.Vendor) error {
	return c.do(ctx, http.MethodPut, "vendor", vendorBody(v), http.StatusOK, nil)
}

// Reset restores the configured pools and clears faults, vendor settings
// and history.
func (c *Client) Reset(ctx context.Context) error {
	return c.do(ctx, http.MethodPost, "reset", nil, http.StatusNoContent, nil)
}

// Install downloads and installs the released profile iccid on a device
// (eid "": the one it is bound to); the simulator tells the operator
// over ES2+ and answers what became of each notification.
func (c *Client) Install(ctx context.Context, iccid, eid string) (smdpsim.InstallResult, error) {
	var res smdpsim.InstallResult
	err := c.do(ctx, http.MethodPost, "profiles/"+url.PathEscape(iccid)+"/install", installBody{EID: eid}, http.StatusOK, &res)
	return res, err
}

// Attach attaches the device of the installed profile iccid to the
// network.
func (c *Client) Attach(ctx context.Context, iccid string) (smdpsim.Device, error) {
	var d smdpsim.Device
	err := c.do(ctx, http.MethodPost, "profiles/"+url.PathEscape(iccid)+"/attach", nil, http.StatusOK, &d)
	return d, err
}

// Use makes the attached device of iccid use n bytes of data.
func (c *Client) Use(ctx context.Context, iccid string, n int64) (smdpsim.Device, error) {
	var d smdpsim.Device
	err := c.do(ctx, http.MethodPost, "profiles/"+url.PathEscape(iccid)+"/use", useBody{Bytes: n}, http.StatusOK, &d)
	return d, err
}

func (c *Client) do(ctx context.Context, method, path string, in any, want int, out any) error {
	var body io.Reader
	if in != nil {
		data, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(c.BaseURL, "/")+Prefix+path, body)
	if err != nil {
		return fmt.Errorf("control %s: %w", path, err)
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Authorization", "Bearer "+c.Token)
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("control %s: %w", path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("control %s: %w", path, err)
	}
	if resp.StatusCode != want {
		var e struct{ Error string }
		if json.Unmarshal(data, &e) == nil && e.Error != "" {
			return fmt.Errorf("control %s %s: HTTP %d: %s", method, path, resp.StatusCode, e.Error)
		}
		return fmt.Errorf("control %s %s: HTTP %d", method, path, resp.StatusCode)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("control %s: %w", path, err)
		}
	}
	return nil
}
