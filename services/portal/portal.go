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
//
// An attempt is claimed before accounts is asked and given back when it
// did not fail, rather than counted once it has failed: a check followed
// by a count would let any number of parallel attempts through the check
// before the first is counted.
type SignInLimiter interface {
	// Claim takes one attempt for email from addr, unless either has
	// reached its limit in the window: allowed is then false, nothing is
	// taken, and retryAfter is how long until the fuller window ends.
	Claim(ctx context.Context, email, addr string) (allowed bool, retryAfter time.Duration, err error)
	// Release gives back an attempt Claim took, once it is known not to
	// have failed.
	Release(ctx context.Context, email, addr string) error
}

// SignInLimits are the limits a SignInLimiter applies.
type SignInLimits struct {
	PerEmail   int
	PerAddress int
	Window     time.Duration
}

// SignUpLimiter counts attempts at the forms that make a user, sign-up
// and invite acceptance, per client address in fixed windows shared by
// every replica. Every attempt counts, successful or not: each one costs
// a password hash (19 MiB of argon2id), and a successful sign-up makes an
// account.
type SignUpLimiter interface {
	// Claim takes one attempt for addr unless it has reached its limit
	// in the window: allowed is then false and retryAfter how long until
	// the window ends.
	Claim(ctx context.Context, addr string) (allowed bool, retryAfter time.Duration, err error)
}

// SignUpLimits are the limits a SignUpLimiter applies.
type SignUpLimits struct {
	PerAddress int
	Window     time.Duration
}

// Errors the web layer shows as pages of their own.
var (
	// ErrNotFound: what the page names does not exist in the signed-in
	// account's environment (or belongs to someone else): a 404 page.
	ErrNotFound = errors.New("not found")
)

// FieldError is a form's error about one of its fields, shown beside it.
type FieldError struct {
	Field, Message string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Message }
