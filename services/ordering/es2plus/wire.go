package es2plus

import (
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"
)

// Function names as they appear in the path of a call.
const (
	FunctionDownloadOrder = "downloadOrder"
	FunctionConfirmOrder  = "confirmOrder"
	FunctionCancelOrder   = "cancelOrder"
)

// Execution statuses of SGP.22 that this client understands. Any other
// (including Executed-WithWarning and Expired, which the SM-DP+s this
// client talks to do not send) is a protocol error, which a caller treats
// as an unknown outcome: the safe side.
const (
	StatusExecutedSuccess = "Executed-Success"
	StatusFailed          = "Failed"
)

// Values of CancelOrderRequest.FinalProfileStatusIndicator.
const (
	FinalProfileStatusAvailable   = "Available"
	FinalProfileStatusUnavailable = "Unavailable"
)

// DownloadOrderRequest reserves a profile. ProfileType selects the pool;
// EID and ICCID are optional (SGP.22 lets an operator ask for a given
// profile or bind it to an eUICC early).
type DownloadOrderRequest struct {
	ProfileType string
	EID         string
	ICCID       string
}

// ConfirmOrderRequest confirms a reserved profile. ReleaseFlag true
// releases it for download at once, which is what a provider wants.
type ConfirmOrderRequest struct {
	ICCID       string
	ReleaseFlag bool
	EID         string
	MatchingID  string
	SMDSAddress string
}

// ConfirmOrderResponse is what an activation code is built from.
type ConfirmOrderResponse struct {
	MatchingID  string
	SMDPAddress string
	EID         string
}

// CancelOrderRequest gives back a profile that was reserved or confirmed
// but not downloaded.
type CancelOrderRequest struct {
	ICCID                       string
	FinalProfileStatusIndicator string
	EID                         string
	MatchingID                  string
}

type requestHeader struct {
	FunctionRequesterIdentifier string `json:"functionRequesterIdentifier"`
	FunctionCallIdentifier      string `json:"functionCallIdentifier"`
}

type downloadOrderBody struct {
	Header      requestHeader `json:"header"`
	EID         string        `json:"eid,omitempty"`
	ICCID       string        `json:"iccid,omitempty"`
	ProfileType string        `json:"profileType,omitempty"`
}

type confirmOrderBody struct {
	Header      requestHeader `json:"header"`
	ICCID       string        `json:"iccid"`
	EID         string        `json:"eid,omitempty"`
	MatchingID  string        `json:"matchingId,omitempty"`
	SMDSAddress string        `json:"smdsAddress,omitempty"`
	ReleaseFlag bool          `json:"releaseFlag"`
}

type cancelOrderBody struct {
	Header                      requestHeader `json:"header"`
	ICCID                       string        `json:"iccid"`
	EID                         string        `json:"eid,omitempty"`
	MatchingID                  string        `json:"matchingId,omitempty"`
	FinalProfileStatusIndicator string        `json:"finalProfileStatusIndicator"`
}

// checkStrings refuses fields that are not valid UTF-8: encoding/json
// would silently replace their bytes, so the SM-DP+ would see another
// value than the caller passed.
func checkStrings(fields ...string) error {
	for _, f := range fields {
		if !utf8.ValidString(f) {
			return fmt.Errorf("%w: a field is not valid UTF-8", ErrInvalidRequest)
		}
	}
	return nil
}

func encodeDownloadOrder(h requestHeader, r DownloadOrderRequest) ([]byte, error) {
	if err := checkStrings(h.FunctionRequesterIdentifier, h.FunctionCallIdentifier, r.ProfileType, r.EID, r.ICCID); err != nil {
		return nil, err
	}
	if r.ProfileType == "" && r.ICCID == "" {
		return nil, fmt.Errorf("%w: profileType or iccid is required", ErrInvalidRequest)
	}
	return json.Marshal(downloadOrderBody{Header: h, EID: r.EID, ICCID: r.ICCID, ProfileType: r.ProfileType})
}

func encodeConfirmOrder(h requestHeader, r ConfirmOrderRequest) ([]byte, error) {
	if err := checkStrings(h.FunctionRequesterIdentifier, h.FunctionCallIdentifier, r.ICCID, r.EID, r.MatchingID, r.SMDSAddress); err != nil {
		return nil, err
	}
	if r.ICCID == "" {
		return nil, fmt.Errorf("%w: iccid is required", ErrInvalidRequest)
	}
	return json.Marshal(confirmOrderBody{Header: h, ICCID: r.ICCID, EID: r.EID, MatchingID: r.MatchingID, SMDSAddress: r.SMDSAddress, ReleaseFlag: r.ReleaseFlag})
}

func encodeCancelOrder(h requestHeader, r CancelOrderRequest) ([]byte, error) {
	if err := checkStrings(h.FunctionRequesterIdentifier, h.FunctionCallIdentifier, r.ICCID, r.EID, r.MatchingID, r.FinalProfileStatusIndicator); err != nil {
		return nil, err
	}
	if r.ICCID == "" {
		return nil, fmt.Errorf("%w: iccid is required", ErrInvalidRequest)
	}
	switch r.FinalProfileStatusIndicator {
	case FinalProfileStatusAvailable, FinalProfileStatusUnavailable:
	default:
		return nil, fmt.Errorf("%w: finalProfileStatusIndicator must be %q or %q", ErrInvalidRequest, FinalProfileStatusAvailable, FinalProfileStatusUnavailable)
	}
	return json.Marshal(cancelOrderBody{Header: h, ICCID: r.ICCID, EID: r.EID, MatchingID: r.MatchingID, FinalProfileStatusIndicator: r.FinalProfileStatusIndicator})
}

type statusCodeData struct {
	SubjectCode       string `json:"subjectCode"`
	ReasonCode        string `json:"reasonCode"`
	SubjectIdentifier string `json:"subjectIdentifier"`
	Message           string `json:"message"`
}

type responseHeader struct {
	Header *struct {
		FunctionExecutionStatus *struct {
			Status         string          `json:"status"`
			StatusCodeData *statusCodeData `json:"statusCodeData"`
		} `json:"functionExecutionStatus"`
	} `json:"header"`
}

// errProtocol makes a protocol error; the call's function and id are
// filled in by the caller of the decoder.
func errProtocol(format string, args ...any) error {
	return &CallError{Kind: ErrProtocol, Err: fmt.Errorf(format, args...)}
}

// decodeStatus reads the execution status every response carries. It
// returns nil for Executed-Success, a *FunctionError for Failed, and a
// protocol error for anything else.
func decodeStatus(function string, body []byte) error {
	var r responseHeader
	if err := json.Unmarshal(body, &r); err != nil {
		return errProtocol("response is not a JSON object: %v", jsonError(err))
	}
	if r.Header == nil || r.Header.FunctionExecutionStatus == nil {
		return errProtocol("response has no header.functionExecutionStatus")
	}
	st := r.Header.FunctionExecutionStatus
	switch st.Status {
	case StatusExecutedSuccess:
		return nil
	case StatusFailed:
		// SGP.22 makes the codes mandatory in a Failed answer; without
		// them it is not a refusal this client can act on.
		d := st.StatusCodeData
		if d == nil || d.SubjectCode == "" || d.ReasonCode == "" {
			return errProtocol("Failed response without statusCodeData subjectCode and reasonCode")
		}
		return &FunctionError{
			Function:          function,
			SubjectCode:       d.SubjectCode,
			ReasonCode:        d.ReasonCode,
			SubjectIdentifier: d.SubjectIdentifier,
			Message:           d.Message,
		}
	case "":
		return errProtocol("response has no functionExecutionStatus.status")
	default:
		return errProtocol("unknown functionExecutionStatus.status %q", clip(st.Status, 40))
	}
}

// jsonError keeps json's description of what is wrong without echoing
// large parts of the body.
func jsonError(err error) string {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Sprintf("syntax error at offset %d", se.Offset)
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return fmt.Sprintf("field %q has the wrong type (%s)", clip(te.Field, 64), te.Value)
	}
	return clip(err.Error(), 120)
}

// decodeDownloadOrder returns the reserved ICCID. want, when not empty, is
// the ICCID the request asked for: an answer naming another is not one
// this client can trust.
func decodeDownloadOrder(body []byte, want string) (string, error) {
	if err := decodeStatus(FunctionDownloadOrder, body); err != nil {
		return "", err
	}
	var r struct {
		ICCID *string `json:"iccid"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return "", errProtocol("downloadOrder response: %v", jsonError(err))
	}
	if r.ICCID == nil {
		return "", errProtocol("downloadOrder response has no iccid")
	}
	if !ValidICCID(*r.ICCID) {
		return "", errProtocol("downloadOrder response has an invalid iccid %q", clip(*r.ICCID, 32))
	}
	if want != "" && *r.ICCID != want {
		return "", errProtocol("downloadOrder asked for iccid %s and was answered %s", want, *r.ICCID)
	}
	return *r.ICCID, nil
}

func decodeConfirmOrder(body []byte) (ConfirmOrderResponse, error) {
	if err := decodeStatus(FunctionConfirmOrder, body); err != nil {
		return ConfirmOrderResponse{}, err
	}
	var r struct {
		EID         string `json:"eid"`
		MatchingID  string `json:"matchingId"`
		SMDPAddress string `json:"smdpAddress"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return ConfirmOrderResponse{}, errProtocol("confirmOrder response: %v", jsonError(err))
	}
	// Both make the activation code: a confirmation without them is of
	// no use, so it is treated like a garbled answer.
	if r.MatchingID == "" {
		return ConfirmOrderResponse{}, errProtocol("confirmOrder response has no matchingId")
	}
	if r.SMDPAddress == "" {
		return ConfirmOrderResponse{}, errProtocol("confirmOrder response has no smdpAddress")
	}
	return ConfirmOrderResponse{MatchingID: r.MatchingID, SMDPAddress: r.SMDPAddress, EID: r.EID}, nil
}

func decodeCancelOrder(body []byte) error {
	return decodeStatus(FunctionCancelOrder, body)
}

// ValidICCID reports whether s is an ICCID as an SM-DP+ issues them: 19
// digits, the telecom prefix 89, and a valid Luhn check digit.
func ValidICCID(s string) bool {
	if len(s) != 19 || s[0] != '8' || s[1] != '9' {
		return false
	}
	sum := 0
	for i := 0; i < len(s); i++ {
		c := s[len(s)-1-i]
		if c < '0' || c > '9' {
			return false
		}
		d := int(c - '0')
		if i%2 == 1 {
			d *= 2
			if d > 9 {
				d -= 9
			}
		}
		sum += d
	}
	return sum%10 == 0
}
