package es2plus

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
	"unicode/utf8"
)

// checkDecodeError holds every decoder to the error vocabulary: a Failed
// or Expired answer, or a protocol error, nothing else.
func checkDecodeError(t *testing.T, function string, err error) {
	t.Helper()
	var fe *FunctionError
	switch {
	case errors.As(err, &fe):
		if fe.Function != function || (fe.Status != StatusFailed && fe.Status != StatusExpired) {
			t.Fatalf("%s: FunctionError %+v", function, fe)
		}
		_ = fe.Error()
	case errors.Is(err, ErrProtocol):
		if !utf8.ValidString(err.Error()) {
			t.Fatalf("%s: error message is not valid UTF-8: %q", function, err.Error())
		}
	default:
		t.Fatalf("%s: error %v (%T) is neither Failed nor a protocol error", function, err, err)
	}
	if o := Outcome(err); o == OutcomeError || o == OutcomeSuccess {
		t.Fatalf("%s: Outcome %q", function, o)
	}
}

// FuzzDecodeResponse feeds arbitrary bytes to the decoder of each
// function as a response body: it must never panic and must answer either
// a complete, valid result or an error of the package's vocabulary.
func FuzzDecodeResponse(f *testing.F) {
	f.Add([]byte(`{"header":{"functionExecutionStatus":{"status":"Executed-Success"}},"iccid":"8988247000000000001","matchingId":"M","smdpAddress":"smdp.example.com"}`))
	f.Add([]byte(`{"header":{"functionExecutionStatus":{"status":"Failed","statusCodeData":{"subjectCode":"8.2.1","reasonCode":"3.9"}}}}`))
	f.Add([]byte(`garbage`))
	f.Fuzz(func(t *testing.T, body []byte) {
		iccid, _, err := decodeDownloadOrder(body, "")
		if err == nil {
			if n, ok := NormalizeICCID(iccid); !ok || n != iccid {
				t.Fatalf("downloadOrder answered the ICCID %q, which is not valid and normalised", iccid)
			}
		} else {
			checkDecodeError(t, FunctionDownloadOrder, err)
		}
		// Asking for a given ICCID, only that one may come back.
		if got, _, err := decodeDownloadOrder(body, "8988247000000000019"); err == nil && got != "8988247000000000019" {
			t.Fatalf("downloadOrder for 8988247000000000019 answered %q", got)
		}

		resp, _, err := decodeConfirmOrder(body)
		if err == nil {
			if resp.MatchingID == "" {
				t.Fatalf("confirmOrder answered %+v", resp)
			}
		} else {
			checkDecodeError(t, FunctionConfirmOrder, err)
		}

		if _, err := decodeCancelOrder(body); err != nil {
			checkDecodeError(t, FunctionCancelOrder, err)
		}
	})
}

// FuzzEncodeRequest encodes each function's request from arbitrary
// strings: the body must be valid JSON that decodes to exactly the fields
// given, or the request must be refused as invalid (not valid UTF-8, or a
// mandatory field empty) before it is sent.
func FuzzEncodeRequest(f *testing.F) {
	f.Add("operator-1", "6f1c7c1e-2b7a-4c55-9b0a-0b8f0d2b6a11", "esim-1gb", "89049032000000000000000000000001", "8988247000000000001", true)
	f.Add("", "", "", "", "", false)
	f.Add("op\"\\", "id\n", "<script>", "Available", "Unavailable", true)
	f.Fuzz(func(t *testing.T, requester, callID, a, b, c string, flag bool) {
		h := requestHeader{FunctionRequesterIdentifier: requester, FunctionCallIdentifier: callID}
		valid := utf8.ValidString(requester) && utf8.ValidString(callID) && utf8.ValidString(a) && utf8.ValidString(b) && utf8.ValidString(c)

		dor := DownloadOrderRequest{ProfileType: a, EID: b, ICCID: c}
		data, err := encodeDownloadOrder(h, dor)
		if ok := valid && (a != "" || c != ""); !checkEncoded(t, data, err, ok) {
			var got downloadOrderBody
			strictDecode(t, data, &got)
			if want := (downloadOrderBody{Header: h, EID: b, ICCID: c, ProfileType: a}); got != want {
				t.Fatalf("downloadOrder: got %+v, want %+v", got, want)
			}
		}

		cor := ConfirmOrderRequest{ICCID: a, ReleaseFlag: flag, EID: b, MatchingID: c, SMDSAddress: requester}
		data, err = encodeConfirmOrder(h, cor)
		if ok := valid && a != ""; !checkEncoded(t, data, err, ok) {
			var got confirmOrderBody
			strictDecode(t, data, &got)
			if want := (confirmOrderBody{Header: h, ICCID: a, EID: b, MatchingID: c, SMDSAddress: requester, ReleaseFlag: flag}); got != want {
				t.Fatalf("confirmOrder: got %+v, want %+v", got, want)
			}
			// releaseFlag is sent even when false.
			if !bytes.Contains(data, []byte(`"releaseFlag":`)) {
				t.Fatalf("confirmOrder without releaseFlag: %s", data)
			}
		}

		can := CancelOrderRequest{ICCID: a, FinalProfileStatusIndicator: c, EID: b, MatchingID: requester}
		data, err = encodeCancelOrder(h, can)
		if ok := valid && a != "" && (c == "Available" || c == "Unavailable"); !checkEncoded(t, data, err, ok) {
			var got cancelOrderBody
			strictDecode(t, data, &got)
			if want := (cancelOrderBody{Header: h, ICCID: a, EID: b, MatchingID: requester, FinalProfileStatusIndicator: c}); got != want {
				t.Fatalf("cancelOrder: got %+v, want %+v", got, want)
			}
		}
	})
}

// checkEncoded checks that an encoding succeeded exactly when it should,
// and returns whether it failed.
func checkEncoded(t *testing.T, data []byte, err error, ok bool) (failed bool) {
	t.Helper()
	if !ok {
		if !errors.Is(err, ErrInvalidRequest) {
			t.Fatalf("an invalid request was encoded (err %v): %s", err, data)
		}
		return true
	}
	if err != nil {
		t.Fatalf("a valid request was refused: %v", err)
	}
	if !json.Valid(data) {
		t.Fatalf("not JSON: %s", data)
	}
	return false
}

func strictDecode(t *testing.T, data []byte, v any) {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(data))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		t.Fatalf("decoding %s: %v", data, err)
	}
	if d.More() {
		t.Fatalf("trailing data after the object: %s", data)
	}
}
