package es2plus

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"unicode/utf8"

	smdpsim "github.com/esimplatform/esim/services/smdp-sim"
)

// poolSize is each fuzzed simulator's pool: small, so that one call can
// change every state a profile has.
const poolSize = 2

// FuzzHandler sends arbitrary bodies to each ES2+ function of a fresh
// simulator, in process, after one downloadOrder that allocated a profile
// ("$ICCID" in the body stands for its ICCID, which each simulator draws
// anew). Every answer must be an ES2+ answer: JSON with the protocol's
// headers, Executed-Success or Failed with a subject and reason code, a
// Failed for a request that is not one naming what is wrong; a success
// only for a request with both header identifiers; and the pool must
// still account for every profile, each in exactly one state.
func FuzzHandler(f *testing.F) {
	hdr := `"header":{"functionRequesterIdentifier":"esim-ordering","functionCallIdentifier":"call-1"}`
	for _, seed := range []struct {
		function uint8
		body     string
	}{
		{0, `{` + hdr + `,"profileType":"travel"}`},
		{0, `{` + hdr + `,"iccid":"$ICCID"}`},
		{1, `{` + hdr + `,"iccid":"$ICCID","eid":"89049032000000000000000000000001","releaseFlag":true}`},
		{1, `{` + hdr + `,"iccid":"$ICCID","releaseFlag":false,"matchingId":"M-1"}`},
		{2, `{` + hdr + `,"iccid":"$ICCID","finalProfileStatusIndicator":"Available"}`},
		{2, `{` + hdr + `,"iccid":"$ICCID","finalProfileStatusIndicator":"Unavailable"}`},
		{0, `{"header":{"functionCallIdentifier":"x"},"profileType":"travel"}`},
		{1, `not json`},
		{2, `{"header":{"functionRequesterIdentifier":"a","functionCallIdentifier":"b"},"iccid":"$ICCID","finalProfileStatusIndicator":"Deleted"}`},
	} {
		f.Add(seed.function, []byte(seed.body))
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	f.Fuzz(func(t *testing.T, function uint8, body []byte) {
		sim, err := smdpsim.New(smdpsim.Config{SMDPAddress: "smdp.test.example", Pools: []smdpsim.Pool{{ProfileType: "travel", Count: poolSize}}})
		if err != nil {
			t.Fatal(err)
		}
		h := Handler(sim, log)
		first := post(t, h, smdpsim.FunctionDownloadOrder, []byte(`{`+hdr+`,"profileType":"travel"}`))
		var allocated downloadOrderResponse
		if err := json.Unmarshal(first.Body.Bytes(), &allocated); err != nil || !smdpsim.ValidICCID(allocated.ICCID) {
			t.Fatalf("the first downloadOrder: %s", first.Body)
		}
		name := smdpsim.Functions[int(function)%len(smdpsim.Functions)]
		body = bytes.ReplaceAll(body, []byte("$ICCID"), []byte(allocated.ICCID))
		rec := post(t, h, name, body)

		what := name + " " + string(body)
		if rec.Code != http.StatusOK && rec.Code != http.StatusBadRequest && rec.Code != http.StatusRequestEntityTooLarge {
			t.Fatalf("%s: status %d", what, rec.Code)
		}
		if rec.Header().Get("Content-Type") != contentType || rec.Header().Get("X-Admin-Protocol") != ProtocolVersion {
			t.Fatalf("%s: headers %v", what, rec.Header())
		}
		raw := rec.Body.Bytes()
		if !utf8.Valid(raw) {
			t.Fatalf("%s: an answer that is not UTF-8: %q", what, raw)
		}
		var answer struct {
			Header responseHeader `json:"header"`
		}
		dec := json.NewDecoder(bytes.NewReader(raw))
		if err := dec.Decode(&answer); err != nil {
			t.Fatalf("%s: an answer that is not JSON: %q", what, raw)
		}
		status := answer.Header.FunctionExecutionStatus
		switch status.Status {
		case "Executed-Success":
			if status.StatusCodeData != nil || rec.Code != http.StatusOK {
				t.Fatalf("%s: a success with %d %s", what, rec.Code, raw)
			}
			checkSuccess(t, what, name, body, raw)
		case "Failed":
			d := status.StatusCodeData
			if d == nil || d.SubjectCode == "" || d.ReasonCode == "" {
				t.Fatalf("%s: Failed without its codes: %s", what, raw)
			}
			// A request that is not one (not JSON, no identifiers) is
			// refused naming what is missing or wrong.
			if (rec.Code != http.StatusOK || d.ReasonCode == smdpsim.ReasonMissing) && d.SubjectIdentifier == "" {
				t.Fatalf("%s: refused without naming what: %s", what, raw)
			}
		default:
			t.Fatalf("%s: status %q", what, status.Status)
		}

		st := sim.State()
		for _, p := range st.Pools {
			if n := p.Available + p.Allocated + p.Confirmed + p.Released + p.Unavailable; n != poolSize {
				t.Fatalf("%s: the pool holds %d profiles in its states, not %d: %+v", what, n, poolSize, p)
			}
		}
		for _, p := range st.Profiles {
			if !smdpsim.ValidICCID(p.ICCID) {
				t.Fatalf("%s: a profile with the ICCID %q", what, p.ICCID)
			}
		}
	})
}

// checkSuccess holds an Executed-Success to what was asked: a request
// with both identifiers, and the answer's fields.
func checkSuccess(t *testing.T, what, function string, body, raw []byte) {
	t.Helper()
	var req struct {
		Header requestHeader `json:"header"`
	}
	if err := json.Unmarshal(body, &req); err != nil || req.Header.FunctionRequesterIdentifier == "" || req.Header.FunctionCallIdentifier == "" {
		t.Fatalf("%s: a success for a request without both identifiers", what)
	}
	switch function {
	case smdpsim.FunctionDownloadOrder:
		var a downloadOrderResponse
		if json.Unmarshal(raw, &a) != nil || !smdpsim.ValidICCID(a.ICCID) {
			t.Fatalf("%s: downloadOrder answered %s", what, raw)
		}
	case smdpsim.FunctionConfirmOrder:
		var a confirmOrderResponse
		if json.Unmarshal(raw, &a) != nil || a.MatchingID == "" || a.SMDPAddress != "smdp.test.example" {
			t.Fatalf("%s: confirmOrder answered %s", what, raw)
		}
	}
}

func post(t *testing.T, h http.Handler, function string, body []byte) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, PathPrefix+function, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Admin-Protocol", ProtocolVersion)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}
