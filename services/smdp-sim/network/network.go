// Package network serves the simulated mobile network's API to the
// operator: the usage feed (first attach and data used of a list of
// profiles) and bundles (a top-up's data and days added to a profile,
// once per top-up id). JSON over the ES2+ listener's mutual TLS: the
// operator authenticates with the certificate it calls the SM-DP+ with.
package network

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/esimplatform/esim/libs/httpserver"
	smdpsim "github.com/esimplatform/esim/services/smdp-sim"
)

// Prefix is where the network API is served.
const Prefix = "/network/"

// The paths of the API.
const (
	PathUsage   = "/network/v1/usage"
	PathBundles = "/network/v1/bundles"
)

// Error codes of the API's answers.
const (
	CodeInvalidRequest = "invalid_request"
	CodeUnknownICCID   = "unknown_iccid"
	CodeConflict       = "conflict"
)

// UsageRequest asks for the readings of ICCIDs.
type UsageRequest struct {
	ICCIDs []string `json:"iccids"`
}

// Reading is one profile's usage; FirstAttachAt is null before the
// first attach.
type Reading struct {
	ICCID         string     `json:"iccid"`
	FirstAttachAt *time.Time `json:"first_attach_at"`
	UsedBytes     int64      `json:"used_bytes"`
	ReadAt        time.Time  `json:"read_at"`
}

// UsageResponse holds the readings of the ICCIDs the network serves.
type UsageResponse struct {
	Readings []Reading `json:"readings"`
}

// BundleRequest adds a bundle.
type BundleRequest struct {
	TopUpID string `json:"topup_id"`
	ICCID   string `json:"iccid"`
	Bytes   int64  `json:"bytes"`
	Days    int32  `json:"days"`
}

// BundleResponse is the bundle as the network holds it; Added is false
// for a top-up id seen before.
type BundleResponse struct {
	Bundle BundleRequest `json:"bundle"`
	Added  bool          `json:"added"`
}

// ErrorResponse is every refusal.
type ErrorResponse struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// Handler serves the network API of sim.
func Handler(sim *smdpsim.Sim, log *slog.Logger) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+PathUsage, func(w http.ResponseWriter, r *http.Request) {
		httpserver.SetRoute(r.Context(), PathUsage)
		var req UsageRequest
		if !decode(w, r, &req) {
			return
		}
		readings, err := sim.Usage(req.ICCIDs)
		if err != nil {
			writeError(w, err)
			return
		}
		out := UsageResponse{Readings: make([]Reading, 0, len(readings))}
		for _, u := range readings {
			rd := Reading{ICCID: u.ICCID, UsedBytes: u.UsedBytes, ReadAt: u.ReadAt}
			if !u.AttachedAt.IsZero() {
				rd.FirstAttachAt = &u.AttachedAt
			}
			out.Readings = append(out.Readings, rd)
		}
		writeJSON(w, http.StatusOK, out)
	})
	mux.HandleFunc("POST "+PathBundles, func(w http.ResponseWriter, r *http.Request) {
		httpserver.SetRoute(r.Context(), PathBundles)
		var req BundleRequest
		if !decode(w, r, &req) {
			return
		}
		added, err := sim.AddBundle(smdpsim.Bundle{TopUpID: req.TopUpID, ICCID: req.ICCID, Bytes: req.Bytes, Days: req.Days})
		log.InfoContext(r.Context(), "network bundle", "topup_id", req.TopUpID, "iccid", req.ICCID, "added", added, "err", err)
		if err != nil {
			writeError(w, err)
			return
		}
		status := http.StatusOK
		if added {
			status = http.StatusCreated
		}
		writeJSON(w, status, BundleResponse{Bundle: req, Added: added})
	})
	mux.HandleFunc(Prefix, func(w http.ResponseWriter, r *http.Request) {
		httpserver.SetRoute(r.Context(), Prefix)
		writeCode(w, http.StatusNotFound, CodeInvalidRequest, "no such network API call: POST "+PathUsage+" and POST "+PathBundles+" are served")
	})
	return mux
}

// decode reads a JSON body strictly, so a misspelt field is refused
// rather than read as zero.
func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		writeCode(w, http.StatusBadRequest, CodeInvalidRequest, "body: not a JSON request of this call: "+err.Error())
		return false
	}
	return true
}

func writeError(w http.ResponseWriter, err error) {
	var ve *smdpsim.ValidationError
	switch {
	case errors.As(err, &ve):
		writeCode(w, http.StatusBadRequest, CodeInvalidRequest, ve.Error())
	case errors.Is(err, smdpsim.ErrUnknownICCID):
		writeCode(w, http.StatusNotFound, CodeUnknownICCID, err.Error())
	case errors.Is(err, smdpsim.ErrBundleConflict):
		writeCode(w, http.StatusConflict, CodeConflict, err.Error())
	default:
		writeCode(w, http.StatusInternalServerError, "internal", fmt.Sprintf("%v", err))
	}
}

func writeCode(w http.ResponseWriter, status int, code, msg string) {
	var e ErrorResponse
	e.Error.Code, e.Error.Message = code, msg
	writeJSON(w, status, e)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// IsNetworkPath says whether path is the network API's rather than ES2+'s.
func IsNetworkPath(path string) bool { return strings.HasPrefix(path, Prefix) }
