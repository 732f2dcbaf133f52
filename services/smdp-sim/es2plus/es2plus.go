// Package es2plus serves the simulator's SGP.22 ES2+ functions over HTTP:
// JSON in, JSON out, the transport of a real SM-DP+ (mutual TLS is the
// server's).
package es2plus

import (
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"regexp"
	"slices"
	"strings"

	"github.com/esimplatform/esim/libs/httpserver"
	smdpsim "github.com/esimplatform/esim/services/smdp-sim"
)

const (
	// ProtocolVersion is the X-Admin-Protocol of an answer to a call
	// without a valid one. A call in any version of SGP.22 v2 is answered
	// in its own.
	ProtocolVersion = "gsma/rsp/v2.5.0"
	// PathPrefix is where the functions are.
	PathPrefix = "/gsma/rsp2/es2plus/"
	// MaxBodyBytes bounds a request: ES2+ requests are a few hundred bytes.
	MaxBodyBytes = 64 << 10
	// Garbage is the body of a garbage fault: what a misconfigured proxy
	// might answer.
	Garbage = "<html>garbage</html>"
)

const contentType = "application/json;charset=UTF-8"

// protocolVersion is the X-Admin-Protocol a call must carry: any version
// of SGP.22 v2, gsma/rsp/v2.<n>[.<n>], which all define ES2+ alike for the
// functions served here.
var protocolVersion = regexp.MustCompile(`^gsma/rsp/v2\.[0-9]{1,3}(\.[0-9]{1,3})?$`)

type requestHeader struct {
	FunctionRequesterIdentifier string `json:"functionRequesterIdentifier"`
	FunctionCallIdentifier      string `json:"functionCallIdentifier"`
}

type downloadOrderRequest struct {
	Header      requestHeader `json:"header"`
	EID         string        `json:"eid"`
	ICCID       string        `json:"iccid"`
	ProfileType string        `json:"profileType"`
}

type confirmOrderRequest struct {
	Header      requestHeader `json:"header"`
	ICCID       string        `json:"iccid"`
	EID         string        `json:"eid"`
	MatchingID  string        `json:"matchingId"`
	SMDSAddress string        `json:"smdsAddress"`
	// ReleaseFlag is mandatory: nil is a request without it.
	ReleaseFlag *bool `json:"releaseFlag"`
}

type cancelOrderRequest struct {
	Header                      requestHeader `json:"header"`
	ICCID                       string        `json:"iccid"`
	EID                         string        `json:"eid"`
	MatchingID                  string        `json:"matchingId"`
	FinalProfileStatusIndicator string        `json:"finalProfileStatusIndicator"`
}

type releaseProfileRequest struct {
	Header requestHeader `json:"header"`
	ICCID  string        `json:"iccid"`
}

type statusCodeData struct {
	SubjectCode       string `json:"subjectCode"`
	ReasonCode        string `json:"reasonCode"`
	SubjectIdentifier string `json:"subjectIdentifier,omitempty"`
	Message           string `json:"message,omitempty"`
}

type executionStatus struct {
	Status         string          `json:"status"`
	StatusCodeData *statusCodeData `json:"statusCodeData,omitempty"`
}

type responseHeader struct {
	FunctionExecutionStatus executionStatus `json:"functionExecutionStatus"`
}

type downloadOrderResponse struct {
	Header responseHeader `json:"header"`
	ICCID  string         `json:"iccid"`
}

type confirmOrderResponse struct {
	Header      responseHeader `json:"header"`
	EID         string         `json:"eid,omitempty"`
	MatchingID  string         `json:"matchingId"`
	SMDPAddress string         `json:"smdpAddress,omitempty"`
}

// headerOnly is the answer of cancelOrder and releaseProfile, and of
// every refusal.
type headerOnly struct {
	Header responseHeader `json:"header"`
}

// executed is the header of a success: Executed-WithWarning with its
// codes when the simulator warns (a vendor setting).
func executed(w *smdpsim.Warning) responseHeader {
	if w == nil {
		return responseHeader{FunctionExecutionStatus: executionStatus{Status: "Executed-Success"}}
	}
	return responseHeader{FunctionExecutionStatus: executionStatus{Status: "Executed-WithWarning", StatusCodeData: &statusCodeData{
		SubjectCode: w.SubjectCode, ReasonCode: w.ReasonCode, SubjectIdentifier: w.SubjectIdentifier, Message: w.Message,
	}}}
}

func failedHeader(fe *smdpsim.FunctionError) responseHeader {
	return responseHeader{FunctionExecutionStatus: executionStatus{Status: "Failed", StatusCodeData: &statusCodeData{
		SubjectCode: fe.SubjectCode, ReasonCode: fe.ReasonCode, SubjectIdentifier: fe.SubjectIdentifier, Message: fe.Message,
	}}}
}

// Handler serves POST PathPrefix{downloadOrder,confirmOrder,cancelOrder,
// releaseProfile} on sim, logging each call with its function, ICCID and
// outcome. Every answer is an ES2+ answer, a refusal of what is not an
// ES2+ call included (a Failed body with the HTTP status that fits),
// except the transport faults: hang (503, no body), garbage and lose.
func Handler(sim *smdpsim.Sim, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Admin-Protocol", ProtocolVersion)
		function, ok := strings.CutPrefix(r.URL.Path, PathPrefix)
		if !ok {
			refuse(w, http.StatusNotFound, smdpsim.ReasonUnknown, "path", "not an ES2+ path: the functions are under "+PathPrefix)
			return
		}
		if !slices.Contains(smdpsim.Functions, function) {
			refuse(w, http.StatusNotFound, smdpsim.ReasonUnknown, "function", "unknown ES2+ function: "+strings.Join(smdpsim.Functions, ", ")+" are served")
			return
		}
		httpserver.SetRoute(r.Context(), PathPrefix+function)
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			refuse(w, http.StatusMethodNotAllowed, smdpsim.ReasonInvalid, "method", "ES2+ functions are called with POST")
			return
		}
		version := r.Header.Get("X-Admin-Protocol")
		if !protocolVersion.MatchString(version) {
			refuse(w, http.StatusBadRequest, smdpsim.ReasonInvalid, "X-Admin-Protocol", "X-Admin-Protocol must be gsma/rsp/v2.<n>[.<n>], such as "+ProtocolVersion)
			return
		}
		w.Header().Set("X-Admin-Protocol", version)
		if mt, params, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" ||
			(params["charset"] != "" && !strings.EqualFold(params["charset"], "UTF-8")) {
			refuse(w, http.StatusUnsupportedMediaType, smdpsim.ReasonInvalid, "Content-Type", "Content-Type must be application/json, in UTF-8")
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
		if err != nil {
			var tooLarge *http.MaxBytesError
			if errors.As(err, &tooLarge) {
				refuse(w, http.StatusRequestEntityTooLarge, smdpsim.ReasonInvalid, "body", "the body is larger than 64 KiB")
			}
			return // the client went away mid-body
		}

		c := call{function: function, log: log, w: w, r: r}
		switch function {
		case smdpsim.FunctionDownloadOrder:
			var req downloadOrderRequest
			if !c.decode(body, &req, &req.Header) {
				return
			}
			c.iccid = req.ICCID
			res, err := sim.DownloadOrder(r.Context(), smdpsim.DownloadOrderRequest{
				Header: req.Header.domain(), EID: req.EID, ICCID: req.ICCID, ProfileType: req.ProfileType,
			})
			if err == nil {
				c.iccid = res.ICCID
			}
			c.answer(err, downloadOrderResponse{Header: executed(res.Warning), ICCID: res.ICCID})
		case smdpsim.FunctionConfirmOrder:
			var req confirmOrderRequest
			if !c.decode(body, &req, &req.Header) {
				return
			}
			c.iccid = req.ICCID
			res, err := sim.ConfirmOrder(r.Context(), smdpsim.ConfirmOrderRequest{
				Header: req.Header.domain(), ICCID: req.ICCID, EID: req.EID, MatchingID: req.MatchingID, SMDSAddress: req.SMDSAddress, ReleaseFlag: req.ReleaseFlag,
			})
			c.answer(err, confirmOrderResponse{Header: executed(res.Warning), EID: res.EID, MatchingID: res.MatchingID, SMDPAddress: res.SMDPAddress})
		case smdpsim.FunctionCancelOrder:
			var req cancelOrderRequest
			if !c.decode(body, &req, &req.Header) {
				return
			}
			c.iccid = req.ICCID
			res, err := sim.CancelOrder(r.Context(), smdpsim.CancelOrderRequest{
				Header: req.Header.domain(), ICCID: req.ICCID, EID: req.EID, MatchingID: req.MatchingID, FinalProfileStatusIndicator: req.FinalProfileStatusIndicator,
			})
			c.answer(err, headerOnly{Header: executed(res.Warning)})
		case smdpsim.FunctionReleaseProfile:
			var req releaseProfileRequest
			if !c.decode(body, &req, &req.Header) {
				return
			}
			c.iccid = req.ICCID
			res, err := sim.ReleaseProfile(r.Context(), smdpsim.ReleaseProfileRequest{Header: req.Header.domain(), ICCID: req.ICCID})
			c.answer(err, headerOnly{Header: executed(res.Warning)})
		}
	})
}

func (h requestHeader) domain() smdpsim.Header {
	return smdpsim.Header{FunctionRequesterIdentifier: h.FunctionRequesterIdentifier, FunctionCallIdentifier: h.FunctionCallIdentifier}
}

// call is one ES2+ call being answered.
type call struct {
	function string
	iccid    string
	callID   string
	log      *slog.Logger
	w        http.ResponseWriter
	r        *http.Request
}

// decode reads the body into req and checks its header h (req's own);
// on failure it has answered.
func (c *call) decode(body []byte, req any, h *requestHeader) bool {
	if err := json.Unmarshal(body, req); err != nil {
		c.logOutcome(smdpsim.OutcomeFailed, "body is not a JSON request")
		refuse(c.w, http.StatusBadRequest, smdpsim.ReasonInvalid, "body", "the body is not a JSON "+c.function+" request")
		return false
	}
	c.callID = h.FunctionCallIdentifier
	var missing string
	switch {
	case h.FunctionRequesterIdentifier == "":
		missing = "functionRequesterIdentifier"
	case h.FunctionCallIdentifier == "":
		missing = "functionCallIdentifier"
	default:
		return true
	}
	fe := &smdpsim.FunctionError{SubjectCode: smdpsim.SubjectFunction, ReasonCode: smdpsim.ReasonMissing, SubjectIdentifier: missing, Message: "header." + missing + " is required"}
	c.answer(fe, nil)
	return false
}

// answer writes ok for a success, a Failed header for a refusal, and the
// transport's answer for a hang, garbage or lose fault.
func (c *call) answer(err error, ok any) {
	outcome := smdpsim.Outcome(err)
	var fe *smdpsim.FunctionError
	switch {
	case err == nil:
		c.logOutcome(outcome, "")
		writeJSON(c.w, http.StatusOK, ok)
	case errors.As(err, &fe):
		c.logOutcome(outcome, fe.SubjectCode+"/"+fe.ReasonCode, "message", fe.Message)
		writeJSON(c.w, http.StatusOK, headerOnly{Header: failedHeader(fe)})
	case errors.Is(err, smdpsim.ErrHang):
		c.logOutcome(outcome, "")
		c.w.WriteHeader(http.StatusServiceUnavailable)
	case errors.Is(err, smdpsim.ErrGarbage):
		c.logOutcome(outcome, "")
		c.w.Header().Set("Content-Type", "text/html")
		c.w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(c.w, Garbage)
	case errors.Is(err, smdpsim.ErrLost):
		c.logOutcome(outcome, "")
		lose(c.w)
	default:
		c.log.ErrorContext(c.r.Context(), "es2plus call", "function", c.function, "iccid", c.iccid, "err", err)
		c.w.WriteHeader(http.StatusInternalServerError)
	}
}

func (c *call) logOutcome(outcome, codes string, more ...any) {
	args := append([]any{"function", c.function, "iccid", c.iccid, "outcome", outcome, "function_call_identifier", c.callID}, more...)
	if codes != "" {
		args = append(args, "codes", codes)
	}
	c.log.InfoContext(c.r.Context(), "es2plus call", args...)
}

// lose closes the connection without an answer, as a crash or a cut
// network after the SM-DP+ executed the call would: the client sees a
// transport error, not an answer.
func lose(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		// HTTP/2, or a writer that cannot hand its connection over: the
		// server resets the stream or closes the connection, unanswered.
		panic(http.ErrAbortHandler)
	}
	_ = conn.Close()
}

// refuse answers a request that is not an ES2+ call at all, with a
// Failed body so a client that reads it still learns why.
func refuse(w http.ResponseWriter, status int, reason, subject, message string) {
	writeJSON(w, status, headerOnly{Header: failedHeader(&smdpsim.FunctionError{
		SubjectCode: smdpsim.SubjectFunction, ReasonCode: reason, SubjectIdentifier: subject, Message: message,
	})})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", contentType)
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
