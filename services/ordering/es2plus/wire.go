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

// The execution statuses of SGP.22. Executed-WithWarning is a success
// whose status codes say something the operator should see (logged);
// Failed and Expired are refusals, with or without status codes. Any
// other status is a protocol error, which a caller treats as an unknown
// outcome: the safe side.
const (
	StatusExecutedSuccess     = "Executed-Success"
	StatusExecutedWithWarning = "Executed-WithWarning"
	StatusFailed              = "Failed"
	StatusExpired             = "Expired"
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
	// ConfirmationCode is the code the end user enters to download the
	// profile, for profile types that need one; "" sends none.
	ConfirmationCode string
}

// ConfirmOrderResponse is what an activation code is built from.
// SMDPAddress is "" when the SM-DP+ left it out (SGP.22 makes it
// optional): the caller knows its address.
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
	Header           requestHeader `json:"header"`
	ICCID            string        `json:"iccid"`
	EID              string        `json:"eid,omitempty"`
	MatchingID       string        `json:"matchingId,omitempty"`
	ConfirmationCode string        `json:"confirmationCode,omitempty"`
	SMDSAddress      string        `json:"smdsAddress,omitempty"`
	ReleaseFlag      bool          `json:"releaseFlag"`
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
	if err := checkStrings(h.FunctionRequesterIdentifier, h.FunctionCallIdentifier, r.ICCID, r.EID, r.MatchingID, r.SMDSAddress, r.ConfirmationCode); err != nil {
		return nil, err
	}
	if r.ICCID == "" {
		return nil, fmt.Errorf("%w: iccid is required", ErrInvalidRequest)
	}
	return json.Marshal(confirmOrderBody{Header: h, ICCID: r.ICCID, EID: r.EID, MatchingID: r.MatchingID,
		ConfirmationCode: r.ConfirmationCode, SMDSAddress: r.SMDSAddress, ReleaseFlag: r.ReleaseFlag})
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

// Warning is the status codes of an Executed-WithWarning answer.
type Warning struct {
	SubjectCode, ReasonCode, SubjectIdentifier, Message string
}

// decodeStatus reads the execution status every response carries. It
// returns nil for an execution (and, for Executed-WithWarning, its
// codes), a *FunctionError for Failed or Expired, and a protocol error for
// anything else.
func decodeStatus(function string, body []byte) (*Warning, error) {
	var r responseHeader
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, errProtocol("response is not a JSON object: %v", jsonError(err))
	}
	if r.Header == nil || r.Header.FunctionExecutionStatus == nil {
		return nil, errProtocol("response has no header.functionExecutionStatus")
	}
	st := r.Header.FunctionExecutionStatus
	d := st.StatusCodeData
	if d == nil {
		d = &statusCodeData{}
	}
	switch st.Status {
	case StatusExecutedSuccess:
		return nil, nil
	case StatusExecutedWithWarning:
		return &Warning{SubjectCode: d.SubjectCode, ReasonCode: d.ReasonCode, SubjectIdentifier: d.SubjectIdentifier, Message: d.Message}, nil
	case StatusFailed, StatusExpired:
		// A refusal even without its codes, which SGP.22 asks for but
		// some SM-DP+s leave out: the function was not executed either
		// way.
		return nil, &FunctionError{
			Function:          function,
			Status:            st.Status,
			SubjectCode:       d.SubjectCode,
			ReasonCode:        d.ReasonCode,
			SubjectIdentifier: d.SubjectIdentifier,
			Message:           d.Message,
		}
	case "":
		return nil, errProtocol("response has no functionExecutionStatus.status")
	default:
		return nil, errProtocol("unknown functionExecutionStatus.status %q", clip(st.Status, 40))
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

// decodeDownloadOrder returns the reserved ICCID, normalised (see
// NormalizeICCID). want, when not empty, is the ICCID the request asked
// for: an answer naming another is not one this client can trust.
func decodeDownloadOrder(body []byte, want string) (string, *Warning, error) {
	warning, err := decodeStatus(FunctionDownloadOrder, body)
	if err != nil {
		return "", nil, err
	}
	var r struct {
		ICCID *string `json:"iccid"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return "", nil, errProtocol("downloadOrder response: %v", jsonError(err))
	}
	if r.ICCID == nil {
		return "", nil, errProtocol("downloadOrder response has no iccid")
	}
	iccid, ok := NormalizeICCID(*r.ICCID)
	if !ok {
		return "", nil, errProtocol("downloadOrder response has an invalid iccid %q", clip(*r.ICCID, 32))
	}
	if w, _ := NormalizeICCID(want); want != "" && iccid != w {
		return "", nil, errProtocol("downloadOrder asked for iccid %s and was answered %s", want, *r.ICCID)
	}
	return iccid, warning, nil
}

func decodeConfirmOrder(body []byte) (ConfirmOrderResponse, *Warning, error) {
	warning, err := decodeStatus(FunctionConfirmOrder, body)
	if err != nil {
		return ConfirmOrderResponse{}, nil, err
	}
	var r struct {
		EID         string `json:"eid"`
		MatchingID  string `json:"matchingId"`
		SMDPAddress string `json:"smdpAddress"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return ConfirmOrderResponse{}, nil, errProtocol("confirmOrder response: %v", jsonError(err))
	}
	// The matching id makes the activation code: a confirmation without
	// it is of no use, so it is treated like a garbled answer.
	if r.MatchingID == "" {
		return ConfirmOrderResponse{}, nil, errProtocol("confirmOrder response has no matchingId")
	}
	return ConfirmOrderResponse{MatchingID: r.MatchingID, SMDPAddress: r.SMDPAddress, EID: r.EID}, warning, nil
}

func decodeCancelOrder(body []byte) (*Warning, error) {
	return decodeStatus(FunctionCancelOrder, body)
}

// NormalizeICCID returns the ICCID an SM-DP+ answered as the platform
// keeps it, and whether it is one: 18 to 20 digits starting 89 (the
// telecom prefix), the last a Luhn check digit of the others. A 20th
// character F (either case) is the padding of a 19-digit ICCID that some
// SM-DP+s send (as the ICCID is stored on the card, in nibbles), and is
// dropped.
func NormalizeICCID(s string) (string, bool) {
	if len(s) == 20 && (s[19] == 'F' || s[19] == 'f') {
		s = s[:19]
	}
	if len(s) < 18 || len(s) > 20 || s[0] != '8' || s[1] != '9' {
		return "", false
	}
	sum := 0
	for i := 0; i < len(s); i++ {
		c := s[len(s)-1-i]
		if c < '0' || c > '9' {
			return "", false
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
	if sum%10 != 0 {
		return "", false
	}
	return s, true
}
