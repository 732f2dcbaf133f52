package ordering

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/google/uuid"
)

// ValidICCID reports whether s is an ICCID as the platform keeps them:
// 18 to 20 digits (19 for the sandbox's and most SM-DP+s'), starting 89
// (telecommunications), the last a Luhn check digit.
func ValidICCID(s string) bool {
	return len(s) >= 18 && len(s) <= 20 && strings.HasPrefix(s, "89") && LuhnValid(s)
}

// LuhnValid reports whether s is all digits and its last digit is the
// Luhn check digit of the others.
func LuhnValid(s string) bool {
	if s == "" {
		return false
	}
	sum := 0
	for i := range len(s) {
		c := s[len(s)-1-i]
		if c < '0' || c > '9' {
			return false
		}
		d := int(c - '0')
		if i%2 == 1 {
			if d *= 2; d > 9 {
				d -= 9
			}
		}
		sum += d
	}
	return sum%10 == 0
}

// newQRToken returns the unguessable last element of an eSIM's QR image
// URL: 256 random bits, base64url.
func newQRToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return base64.RawURLEncoding.EncodeToString(b)
}

// qrTokenLength is the length of newQRToken's tokens.
const qrTokenLength = 43

// present fills in what is derived from an order's stored fields.
func (s *Service) present(o *Order) {
	for i := range o.Esims {
		s.presentEsim(&o.Esims[i])
	}
}

// presentEsim fills in an eSIM's activation code, QR image URL and
// install instructions from its stored fields.
func (s *Service) presentEsim(e *Esim) {
	e.ActivationCode = "LPA:1$" + e.SMDPAddress + "$" + e.MatchingID
	e.QRCodeURL = s.qrBaseURL + "/" + e.QRToken + ".png"
	carddata := url.QueryEscape(e.ActivationCode)
	e.Install = Install{
		Instructions:         instructions(e.SMDPAddress, e.MatchingID, e.ActivationCode),
		IOSUniversalLink:     "https://esimsetup.apple.com/esim_qrcode_provisioning?carddata=" + carddata,
		AndroidUniversalLink: "https://esimsetup.android.com/esim_qrcode_provisioning?carddata=" + carddata,
	}
}

// instructions are the install steps in plain text, with the values a
// traveller types where the QR code cannot be scanned (the eSIM is
// installed on the phone that shows the code, say).
func instructions(smdp, matchingID, activationCode string) string {
	return "iPhone (iOS 17.4 or later):\n" +
		"1. Connect to Wi-Fi and open Settings > Mobile Service (Cellular on some models) > Add eSIM.\n" +
		"2. Tap Use QR Code and scan the QR code. Without a camera, tap Enter Details Manually and enter\n" +
		"   SM-DP+ Address: " + smdp + "\n" +
		"   Activation Code: " + matchingID + "\n" +
		"3. Follow the prompts, label the eSIM, and turn on Data Roaming for it when you arrive.\n" +
		"\n" +
		"Android (Pixel, Samsung and most others):\n" +
		"1. Connect to Wi-Fi and open Settings > Network & internet > SIMs > Add SIM > Download a SIM instead?\n" +
		"2. Scan the QR code. Without a camera, choose Need help? > Enter it manually and enter the activation code\n" +
		"   " + activationCode + "\n" +
		"3. Follow the prompts, and turn on Roaming for this eSIM when you arrive.\n"
}

// GetEsim returns the eSIM; ErrNotFound outside scope.
func (s *Service) GetEsim(ctx context.Context, scope *Scope, id uuid.UUID) (Esim, error) {
	if err := validScope(scope); err != nil {
		return Esim{}, err
	}
	e, err := s.store.Esim(ctx, scope, id)
	if err != nil {
		return Esim{}, fmt.Errorf("get eSIM %s: %w", id, err)
	}
	s.presentEsim(&e)
	return e, nil
}

// EsimFilter is what ListEsims selects.
type EsimFilter struct {
	Scope *Scope
	// OrderID uuid.Nil is any.
	OrderID uuid.UUID
	// ICCID "" is any.
	ICCID string
	// Status "" is any, else one of EsimStatuses.
	Status      string
	Page, Limit int32
}

// EsimPage is one page of eSIMs and the total across all pages.
type EsimPage struct {
	Esims []Esim
	Total int64
}

// maxICCIDLength is the longest ICCID of ITU-T E.118, whatever issued it.
const maxICCIDLength = 22

// ListEsims returns eSIMs newest first.
func (s *Service) ListEsims(ctx context.Context, f EsimFilter) (EsimPage, error) {
	if err := validScope(f.Scope); err != nil {
		return EsimPage{}, err
	}
	if f.ICCID != "" && (len(f.ICCID) > maxICCIDLength || strings.ContainsFunc(f.ICCID, func(r rune) bool { return r < '0' || r > '9' })) {
		return EsimPage{}, invalid("iccid", fmt.Sprintf("must be an ICCID: up to %d digits", maxICCIDLength))
	}
	if f.Status != "" && !slices.Contains(EsimStatuses, f.Status) {
		return EsimPage{}, invalid("status", "must be ALLOCATED, INSTALLED, ACTIVE, DEPLETED or EXPIRED")
	}
	limit, offset, err := paging(f.Page, f.Limit)
	if err != nil {
		return EsimPage{}, err
	}
	esims, total, err := s.store.ListEsims(ctx, EsimQuery{Scope: f.Scope, OrderID: f.OrderID, ICCID: f.ICCID, Status: f.Status, Limit: limit, Offset: offset})
	if err != nil {
		return EsimPage{}, fmt.Errorf("list eSIMs: %w", err)
	}
	for i := range esims {
		s.presentEsim(&esims[i])
	}
	return EsimPage{Esims: esims, Total: total}, nil
}

// ActivationCode returns the activation code behind a QR token, for the
// public QR image; ErrNotFound for a token no eSIM has.
func (s *Service) ActivationCode(ctx context.Context, token string) (string, error) {
	if len(token) != qrTokenLength || strings.ContainsFunc(token, func(r rune) bool {
		return !(r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_')
	}) {
		// Cannot be a token: answered without a query, and never echoed.
		return "", ErrNotFound
	}
	e, err := s.store.EsimByQRToken(ctx, token)
	if err != nil {
		return "", fmt.Errorf("activation code: %w", err)
	}
	s.presentEsim(&e)
	return e.ActivationCode, nil
}
