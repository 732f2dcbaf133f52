package es2plus

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/esimplatform/esim/libs/httpserver"
	"github.com/esimplatform/esim/services/ordering"

	"github.com/esimplatform/esim/libs/mtls"
)

// The operator's side of ES2+: the SM-DP+ reports the steps of a
// profile's download with handleDownloadProgressInfo (SGP.22 5.3.5),
// which ordering serves over mutual TLS.

// FunctionHandleDownloadProgressInfo is the function the SM-DP+ calls.
const FunctionHandleDownloadProgressInfo = "handleDownloadProgressInfo"

// NotificationPath is where the SM-DP+ calls it.
const NotificationPath = PathPrefix + FunctionHandleDownloadProgressInfo

// NotificationPointBPPInstallation is the notification point of the
// profile's installation on the device (SGP.22 5.3.5): the one that moves
// an eSIM.
const NotificationPointBPPInstallation = 4

// MaxNotificationBytes bounds a notification's body: a few hundred bytes,
// with resultData a few kilobytes.
const MaxNotificationBytes = 64 << 10

// Status codes (SGP.22 5.1.6.4) of refused notifications.
const (
	subjectFunction = "1.2"
	subjectICCID    = "8.2.1"
	reasonInvalid   = "2.1"
	reasonMissing   = "2.2"
	reasonUnknown   = "3.9"
	// reasonExecution is an error of the operator's own: the SM-DP+ may
	// try again later.
	reasonExecution = "4.2"
)

// adminProtocol is what an SM-DP+ may send as X-Admin-Protocol: any
// SGP.22 v2, which all define this function alike.
var adminProtocol = regexp.MustCompile(`^gsma/rsp/v2\.[0-9]{1,3}(\.[0-9]{1,3})?$`)

// ProgressHandler applies an SM-DP+'s report: ordering.Service.
type ProgressHandler interface {
	HandleDownloadProgress(ctx context.Context, p ordering.DownloadProgress) error
}

type notificationBody struct {
	Header *struct {
		FunctionRequesterIdentifier string `json:"functionRequesterIdentifier"`
		FunctionCallIdentifier      string `json:"functionCallIdentifier"`
	} `json:"header"`
	EID                     string `json:"eid"`
	ICCID                   string `json:"iccid"`
	ProfileType             string `json:"profileType"`
	Timestamp               string `json:"timestamp"`
	NotificationPointID     *int   `json:"notificationPointId"`
	NotificationPointStatus *struct {
		Status string `json:"status"`
	} `json:"notificationPointStatus"`
}

type answerStatus struct {
	Status         string          `json:"status"`
	StatusCodeData *statusCodeData `json:"statusCodeData,omitempty"`
}

type answer struct {
	Header struct {
		FunctionExecutionStatus answerStatus `json:"functionExecutionStatus"`
	} `json:"header"`
}

// NotificationHandler serves handleDownloadProgressInfo on h. A
// notification applied, or one the eSIM is past (replayed, out of order)
// or of a step that moves nothing, is executed: 204 No Content, as SGP.22
// answers a function without output data. A notification that cannot be
// applied (an ICCID no live eSIM has, a malformed body) is answered
// Failed with SGP.22's status codes in an HTTP 200, which an SM-DP+ takes
// as final: sending it again would change nothing. Only the operator's
// own failure is a 500, which the SM-DP+ may retry.
func NotificationHandler(h ProgressHandler, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		version := r.Header.Get("X-Admin-Protocol")
		if !adminProtocol.MatchString(version) {
			version = DefaultProtocolVersion
		}
		w.Header().Set("X-Admin-Protocol", version)
		if r.URL.Path != NotificationPath {
			refuse(w, http.StatusNotFound, subjectFunction, reasonUnknown, "path", "the operator serves "+NotificationPath+" only")
			return
		}
		httpserver.SetRoute(r.Context(), NotificationPath)
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			refuse(w, http.StatusMethodNotAllowed, subjectFunction, reasonInvalid, "method", "ES2+ functions are called with POST")
			return
		}
		if !adminProtocol.MatchString(r.Header.Get("X-Admin-Protocol")) {
			refuse(w, http.StatusBadRequest, subjectFunction, reasonInvalid, "X-Admin-Protocol", "X-Admin-Protocol must be gsma/rsp/v2.<n>[.<n>]")
			return
		}
		if mt, params, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" ||
			(params["charset"] != "" && !strings.EqualFold(params["charset"], "UTF-8")) {
			refuse(w, http.StatusUnsupportedMediaType, subjectFunction, reasonInvalid, "Content-Type", "Content-Type must be application/json, in UTF-8")
			return
		}
		data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxNotificationBytes))
		if err != nil {
			if _, tooLarge := errors.AsType[*http.MaxBytesError](err); tooLarge {
				refuse(w, http.StatusRequestEntityTooLarge, subjectFunction, reasonInvalid, "body", "the body is larger than 64 KiB")
			}
			return // the SM-DP+ went away mid-body
		}
		p, callID, refusal := readNotification(data)
		logArgs := []any{"function", FunctionHandleDownloadProgressInfo, "function_call_identifier", clip(callID, 64), "iccid", p.ICCID, "installed", p.Installed}
		if refusal != nil {
			log.InfoContext(r.Context(), "es2plus notification refused", append(logArgs, "codes", refusal.SubjectCode+"/"+refusal.ReasonCode, "message", refusal.Message)...)
			refuse(w, http.StatusOK, refusal.SubjectCode, refusal.ReasonCode, refusal.SubjectIdentifier, refusal.Message)
			return
		}
		switch err := h.HandleDownloadProgress(r.Context(), p); {
		case err == nil:
			log.InfoContext(r.Context(), "es2plus notification", logArgs...)
			w.WriteHeader(http.StatusNoContent)
		case errors.Is(err, ordering.ErrNotFound):
			log.InfoContext(r.Context(), "es2plus notification of an unknown ICCID", logArgs...)
			refuse(w, http.StatusOK, subjectICCID, reasonUnknown, p.ICCID, "no live eSIM has this ICCID")
		default:
			log.ErrorContext(r.Context(), "es2plus notification", append(logArgs, "err", err)...)
			refuse(w, http.StatusInternalServerError, subjectFunction, reasonExecution, FunctionHandleDownloadProgressInfo, "the operator could not apply the notification; try again later")
		}
	})
}

// readNotification reads a notification strictly enough to act on it:
// what the platform needs must be there and well formed; what it does
// not read (eid, profileType, resultData) may be anything.
func readNotification(data []byte) (ordering.DownloadProgress, string, *statusCodeData) {
	var b notificationBody
	if err := json.Unmarshal(data, &b); err != nil {
		return ordering.DownloadProgress{}, "", &statusCodeData{SubjectCode: subjectFunction, ReasonCode: reasonInvalid, SubjectIdentifier: "body",
			Message: "the body is not a JSON handleDownloadProgressInfo request: " + jsonError(err)}
	}
	missing := func(field string) *statusCodeData {
		return &statusCodeData{SubjectCode: subjectFunction, ReasonCode: reasonMissing, SubjectIdentifier: field, Message: field + " is required"}
	}
	invalid := func(field, why string) *statusCodeData {
		return &statusCodeData{SubjectCode: subjectFunction, ReasonCode: reasonInvalid, SubjectIdentifier: field, Message: field + " " + why}
	}
	var callID string
	if b.Header != nil {
		callID = b.Header.FunctionCallIdentifier
	}
	iccid, validICCID := NormalizeICCID(b.ICCID)
	p := ordering.DownloadProgress{ICCID: clip(b.ICCID, 32)}
	switch {
	case b.Header == nil || b.Header.FunctionRequesterIdentifier == "":
		return p, callID, missing("header.functionRequesterIdentifier")
	case b.Header.FunctionCallIdentifier == "":
		return p, callID, missing("header.functionCallIdentifier")
	case b.ICCID == "":
		return p, callID, missing("iccid")
	case !validICCID:
		return p, callID, &statusCodeData{SubjectCode: subjectICCID, ReasonCode: reasonInvalid, SubjectIdentifier: clip(b.ICCID, 32), Message: "iccid is not 18 to 20 digits starting 89 with a Luhn check digit"}
	case b.NotificationPointID == nil:
		return p, callID, missing("notificationPointId")
	case b.NotificationPointStatus == nil || b.NotificationPointStatus.Status == "":
		return p, callID, missing("notificationPointStatus.status")
	case b.Timestamp == "":
		return p, callID, missing("timestamp")
	}
	at, err := time.Parse(time.RFC3339, b.Timestamp)
	if err != nil {
		return p, callID, invalid("timestamp", "is not a date and time such as 2026-11-29T10:00:00Z")
	}
	p.ICCID, p.At = iccid, at
	// Executed-WithWarning is an installation too; Failed is a step that
	// did not happen, which moves nothing.
	p.Installed = *b.NotificationPointID == NotificationPointBPPInstallation && strings.HasPrefix(b.NotificationPointStatus.Status, "Executed-")
	return p, callID, nil
}

func refuse(w http.ResponseWriter, status int, subject, reason, id, message string) {
	var a answer
	a.Header.FunctionExecutionStatus = answerStatus{Status: StatusFailed, StatusCodeData: &statusCodeData{
		SubjectCode: subject, ReasonCode: reason, SubjectIdentifier: id, Message: message,
	}}
	w.Header().Set("Content-Type", ContentType)
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(a)
}

// ServerTLS is the TLS of the operator's ES2+ listener: its certificate
// and key, and only clients with a certificate clientCAFile's CA signed
// get through the handshake (the SM-DP+).
func ServerTLS(certFile, keyFile, clientCAFile string) (*tls.Config, error) {
	c, err := mtls.Server(certFile, keyFile, clientCAFile)
	if err != nil {
		return nil, fmt.Errorf("es2plus: SM-DP+ listener: %w", err)
	}
	return c, nil
}
