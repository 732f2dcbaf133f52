package smdpsim

import (
	"errors"
	"fmt"
)

// FunctionError is an SGP.22 "Failed" execution status: the SM-DP+'s
// definitive refusal of a function, with its status code data.
type FunctionError struct {
	SubjectCode       string
	ReasonCode        string
	SubjectIdentifier string
	Message           string

	// injected marks a refusal made by a fault rather than by the rules,
	// so the counters tell them apart.
	injected bool
}

func (e *FunctionError) Error() string {
	return fmt.Sprintf("%s/%s %s: %s", e.SubjectCode, e.ReasonCode, e.SubjectIdentifier, e.Message)
}

// Subject and reason codes of SGP.22 (section 5.1.6.4) the simulator
// answers with.
const (
	SubjectFunction    = "1.2"
	SubjectEID         = "8.1.1"
	SubjectICCID       = "8.2.1"
	SubjectProfileType = "8.2.5"
	SubjectMatchingID  = "8.2.6"

	ReasonInvalid            = "2.1"
	ReasonMissing            = "2.2"
	ReasonAlreadyInUse       = "3.3"
	ReasonNotAllowed         = "3.7"
	ReasonUnknown            = "3.9"
	ReasonInvalidAssociation = "3.10"
)

func failed(subject, reason, id, format string, args ...any) *FunctionError {
	return &FunctionError{SubjectCode: subject, ReasonCode: reason, SubjectIdentifier: id, Message: fmt.Sprintf(format, args...)}
}

// Faults that are not an SGP.22 answer: the transport answers them its own
// way (an HTTP 503, a body that is not JSON).
var (
	// ErrHang is returned once a hanging call's time is up, its caller
	// gave up or the Sim was closed.
	ErrHang = errors.New("smdpsim: call hung by an injected fault")
	// ErrGarbage asks the transport for an answer no client can parse.
	ErrGarbage = errors.New("smdpsim: garbage answer injected by a fault")
	// ErrLost is a call executed whose answer a fault loses: the
	// transport closes the connection without one.
	ErrLost = errors.New("smdpsim: the function was executed and its answer lost by an injected fault")
)

// ErrNotFound is an unknown profile type given to the control API.
var ErrNotFound = errors.New("not found")

// ValidationError is a control API request with a bad field; Field is
// its JSON name.
type ValidationError struct {
	Field  string
	Reason string
}

func (e *ValidationError) Error() string { return e.Field + ": " + e.Reason }

// Outcomes of a call, as counted in State.Calls and logged.
const (
	OutcomeSuccess      = "success"
	OutcomeFailed       = "failed"
	OutcomeFaultFail    = "fault-fail"
	OutcomeFaultHang    = "fault-hang"
	OutcomeFaultGarbage = "fault-garbage"
	OutcomeFaultLose    = "fault-lose"
	// OutcomeReplayed is a call sent again under the header of one
	// executed before, answered as that one was (see Header).
	OutcomeReplayed = "replayed"
)

// Outcome names what a call's error was, for counters and logs.
func Outcome(err error) string {
	var fe *FunctionError
	switch {
	case err == nil:
		return OutcomeSuccess
	case errors.Is(err, ErrHang):
		return OutcomeFaultHang
	case errors.Is(err, ErrGarbage):
		return OutcomeFaultGarbage
	case errors.Is(err, ErrLost):
		return OutcomeFaultLose
	case errors.As(err, &fe) && fe.injected:
		return OutcomeFaultFail
	default:
		return OutcomeFailed
	}
}
