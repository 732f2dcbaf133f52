package httpapi

import (
	"errors"
	"net/http"
	"strings"

	qrcode "github.com/skip2/go-qrcode"

	"github.com/esimplatform/esim/libs/httpserver"
	"github.com/esimplatform/esim/services/gateway"
)

// QRPath is where the eSIMs' QR images are served, outside /v1: they are
// links for travellers, not an endpoint of the API, and take no key. An
// eSIM's qr_code_url is QR_BASE_URL (this path on the gateway's public
// address) + "<token>.png".
const QRPath = "/qr/"

// qrTokenLength is the length of ordering's QR tokens: 32 random bytes,
// base64url without padding. Anything else is refused without a call.
const qrTokenLength = 43

// qrCode answers the PNG of the activation code behind a token. The token
// is the image's only protection, so its answers say nothing more than
// "not found" about a wrong one, and ask caches to keep it private.
func (a *handlers) qrCode(w http.ResponseWriter, r *http.Request) {
	httpserver.SetRoute(r.Context(), QRPath+"{token}.png")
	token, ok := strings.CutSuffix(r.PathValue("file"), ".png")
	if !ok || len(token) != qrTokenLength || strings.ContainsFunc(token, notBase64URL) {
		writeError(w, r, withMessage(gateway.ErrNotFound, "No such QR code."))
		return
	}
	code, err := a.Orders.ActivationCode(r.Context(), token)
	if errors.Is(err, gateway.ErrNotFound) {
		writeError(w, r, withMessage(err, "No such QR code."))
		return
	}
	if err != nil {
		a.logInternal(r.Context(), err)
		writeError(w, r, err)
		return
	}
	// Medium error correction survives a smudged print or a screenshot;
	// 512 pixels scan from another phone's screen.
	png, err := qrcode.Encode(code, qrcode.Medium, 512)
	if err != nil {
		a.logInternal(r.Context(), err)
		writeError(w, r, err)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "image/png")
	h.Set("Cache-Control", "private, max-age=86400")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	_, _ = w.Write(png)
}

func notBase64URL(r rune) bool {
	return !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || r == '-' || r == '_')
}
