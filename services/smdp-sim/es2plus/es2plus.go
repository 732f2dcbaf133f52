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
	"strings"

	"github.com/esimplatform/esim/libs/httpserver"
	smdpsim "github.com/esimplatform/esim/services/smdp-sim"
)

const (
	// ProtocolVersion is the X-Admin-Protocol a call must carry.
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
	ReleaseFlag bool          `json:"releaseFlag"`
}

type cancelOrderRequest struct {
	Header                      requestHeader `json:"header"`
	ICCID                       string        `json:"iccid"`
	EID                         string        `json:"eid"`
	MatchingID                  string        `json:"matchingId"`
	FinalProfileStatusIndicator string        `json:"finalProfileStatusIndicator"`
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
	SMDPAddress string         `json:"smdpAddress"`
}

type cancelOrderResponse struct {
	Header responseHeader `json:"header"`
}

var success = responseHeader{FunctionExecutionStatus: executionStatus{Status: "Executed-Success"}}

func failedHeader(fe *smdpsim.FunctionError) responseHeader {
	return responseHeader{FunctionExecutionStatus: executionStatus{Status: "Failed", StatusCodeData: &statusCodeData{
		SubjectCode: fe.SubjectCode, ReasonCode: fe.ReasonCode, SubjectIdentifier: fe.SubjectIdentifier, Message: fe.Message,
	}}}
}

// Handler serves POST PathPrefix{downloadOrder,confirmOrder,cancelOrder}
// on sim, logging each call with its function, ICCID and outcome.
func Handler(sim *smdpsim.Sim, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		function, ok := strings.CutPrefix(r.URL.Path, PathPrefix)
		if !ok || !isFunction(function) {
			http.NotFound(w, r)
			return
		}
		httpserver.SetRoute(r.Context(), PathPrefix+function)
		w.Header().Set("X-Admin-Protocol", ProtocolVersion)
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			refuse(w, http.StatusMethodNotAllowed, smdpsim.ReasonInvalid, "method", "ES2+ functions are called with POST")
			return
		}
		if got := r.Header.Get("X-Admin-Protocol"); got != ProtocolVersion {
			refuse(w, http.StatusBadRequest, smdpsim.ReasonInvalid, "X-Admin-Protocol", "X-Admin-Protocol must be "+ProtocolVersion)
			return
		}
		if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
			refuse(w, http.StatusUnsupportedMediaType, smdpsim.ReasonInvalid, "Content-Type", "Content-Type must be application/json")
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
			if !c.decode(body, &req) {
				return
			}
			c.iccid = req.ICCID
			iccid, err := sim.DownloadOrder(r.Context(), smdpsim.DownloadOrderRequest{EID: req.EID, ICCID: req.ICCID, ProfileType: req.ProfileType})
			if err == nil {
				c.iccid = iccid
			}
			c.answer(err, downloadOrderResponse{Header: success, ICCID: iccid})
		case smdpsim.FunctionConfirmOrder:
			var req confirmOrderRequest
			if !c.decode(body, &req) {
				return
			}
			c.iccid = req.ICCID
			res, err := sim.ConfirmOrder(r.Context(), smdpsim.ConfirmOrderRequest{
				ICCID: req.ICCID, EID: req.EID, MatchingID: req.MatchingID, SMDSAddress: req.SMDSAddress, ReleaseFlag: req.ReleaseFlag,
			})
			c.answer(err, confirmOrderResponse{Header: success, EID: res.EID, MatchingID: res.MatchingID, SMDPAddress: res.SMDPAddress})
		case smdpsim.FunctionCancelOrder:
			var req cancelOrderRequest
			if !c.decode(body, &req) {
				return
			}
			c.iccid = req.ICCID
			err := sim.CancelOrder(r.Context(), smdpsim.CancelOrderRequest{
				ICCID: req.ICCID, EID: req.EID, MatchingID: req.MatchingID, FinalProfileStatusIndicator: req.FinalProfileStatusIndicator,
			})
			c.answer(err, cancelOrderResponse{Header: success})
		}
	})
}

func isFunction(name string) bool {
	for _, f := range smdpsim.Functions {
		if f == name {
			return true
		}
	}
	return false
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

// decode reads the body into req and checks its header; on failure it
// has answered.
func (c *call) decode(body []byte, req any) bool {
	if err := json.Unmarshal(body, req); err != nil {
		c.logOutcome(smdpsim.OutcomeFailed, "body is not a JSON request")
		refuse(c.w, http.StatusBadRequest, smdpsim.ReasonInvalid, "body", "the body is not a JSON "+c.function+" request")
		return false
	}
	var h requestHeader
	switch r := req.(type) {
	case *downloadOrderRequest:
		h = r.Header
	case *confirmOrderRequest:
		h = r.Header
	case *cancelOrderRequest:
		h = r.Header
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
// transport's answer for a hang or garbage fault.
func (c *call) answer(err error, ok any) {
	outcome := smdpsim.Outcome(err)
	var fe *smdpsim.FunctionError
	switch {
	case err == nil:
		c.logOutcome(outcome, "")
		writeJSON(c.w, http.StatusOK, ok)
	case errors.As(err, &fe):
		c.logOutcome(outcome, fe.SubjectCode+"/"+fe.ReasonCode, "message", fe.Message)
		writeJSON(c.w, http.StatusOK, cancelOrderResponse{Header: failedHeader(fe)})
	case errors.Is(err, smdpsim.ErrHang):
		c.logOutcome(outcome, "")
		c.w.WriteHeader(http.StatusServiceUnavailable)
	case errors.Is(err, smdpsim.ErrGarbage):
		c.logOutcome(outcome, "")
		c.w.Header().Set("Content-Type", "text/html")
		c.w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(c.w, Garbage)
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

// refuse answers a request that is not an ES2+ call at all, with a
// Failed body so a client that reads it still learns why.
func refuse(w http.ResponseWriter, status int, reason, subject, message string) {
	writeJSON(w, status, cancelOrderResponse{Header: failedHeader(&smdpsim.FunctionError{
		SubjectCode: smdpsim.SubjectFunction, ReasonCode: reason, SubjectIdentifier: subject, Message: message,
	})})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", contentType)
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
