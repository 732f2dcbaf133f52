// Package portal holds the rules of the partners' web portal: the two
// environments a partner switches between, how sign-in attempts are
// limited, page sizes and the portal's errors. The portal stores nothing:
// accounts, wallet, ordering and webhook own everything it shows.
package portal

import (
	"context"
	"errors"
	"time"
)

// Environment is where a page's data lives: sandbox (no real money, no
// real profiles) or live. Every partner page is under /{env}/.
type Environment string

const (
	Sandbox Environment = "sandbox"
	Live    Environment = "live"
)

// Environments lists both, sandbox first (the page a partner lands on).
var Environments = []Environment{Sandbox, Live}

// Other is the environment the switch links to.
func (e Environment) Other() Environment {
	if e == Live {
		return Sandbox
	}
	return Live
}

// Page sizes of the portal's lists.
const (
	// PageSize is the length of the orders, events and ledger pages.
	PageSize = 20
	// RecentOrders and RecentFailures are what the overview shows.
	RecentOrders   = 5
	RecentFailures = 5
	// MaxPage is the last page a list may be asked for (the services'
	// bound).
	MaxPage = 10000
)

// MaxSandboxTopUpMinor is the most a partner may add to their sandbox
// balance at once: 1000.00 in the account's currency. Sandbox money buys
// sandbox eSIMs only.
const MaxSandboxTopUpMinor = 1000_00

// SignInLimiter counts failed sign-ins, per email and per client address,
// in fixed windows shared by every replica. Only failures count: a
// partner signing in all day from one office is never locked out, while a
// guesser is stopped at the limit, whatever it tries next.
type SignInLimiter interface {
	// Check says whether email may sign in from addr: allowed is false
	// once either has failed its limit in the window; retryAfter is then
	// how long until the fuller window ends.
	Check(ctx context.Context, email, addr string) (allowed bool, retryAfter time.Duration, err error)
	// Failed counts a failed sign-in for email and addr.
	Failed(ctx context.Context, email, addr string) error
}

// SignInLimits are the limits a SignInLimiter applies.
type SignInLimits struct {
	PerEmail   int
	PerAddress int
	Window     time.Duration
}

// Errors the web layer shows as pages of their own.
var (
	// ErrNotFound: what the page names does not exist in the signed-in
	// account's environment (or belongs to someone else): a 404 page.
	ErrNotFound = errors.New("not found")
	// ErrTooManyAttempts: the sign-in limit is reached.
	ErrTooManyAttempts = errors.New("too many sign-in attempts")
)

// FieldError is a form's error about one of its fields, shown beside it.
type FieldError struct {
	Field, Message string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Message }
