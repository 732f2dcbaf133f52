package twirpserver_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twitchtv/twirp"

	"github.com/esimplatform/esim/libs/internalauth"
	"github.com/esimplatform/esim/libs/internalauth/internalauthtest"
	"github.com/esimplatform/esim/libs/postgres/pgtest"
	accountsv1 "github.com/esimplatform/esim/proto/accounts/v1"
	"github.com/esimplatform/esim/services/accounts"
	"github.com/esimplatform/esim/services/accounts/postgres"
	"github.com/esimplatform/esim/services/accounts/twirpserver"
)

// clock is a settable time for the service, so sessions and invites expire
// without waiting.
type clock struct{ now atomic.Pointer[time.Time] }

func newClock() *clock {
	c := &clock{}
	c.set(time.Now())
	return c
}
func (c *clock) set(t time.Time)         { c.now.Store(&t) }
func (c *clock) advance(d time.Duration) { c.set(c.Now().Add(d)) }
func (c *clock) Now() time.Time          { return *c.now.Load() }

// newPortalClient serves the handler as run does, callers and policy
// included, over a fresh database, with the service's clock in the test's
// hands. It returns a client for the portal and one for an operator.
func newPortalClient(t *testing.T) (portal, operator accountsv1.Accounts, pool *pgxpool.Pool, clk *clock) {
	t.Helper()
	pool = pgtest.New(t, postgres.Migrations)
	clk = newClock()
	svc := accounts.NewService(postgres.NewStore(pool), accounts.WithClock(clk.Now),
		accounts.WithSessionTTL(time.Hour), accounts.WithInviteTTL(24*time.Hour))
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	ts := httptest.NewServer(twirpserver.Handler(svc, log, internalauthtest.Callers()))
	t.Cleanup(ts.Close)
	as := func(c internalauth.Caller) accountsv1.Accounts {
		return accountsv1.NewAccountsProtobufClient(ts.URL, internalauthtest.As(ts.Client(), c))
	}
	return as(internalauth.Portal), as(internalauth.Operator), pool, clk
}

const password = "correct horse battery"

func signUp(t *testing.T, c accountsv1.Accounts, email string) *accountsv1.SessionResponse {
	t.Helper()
	resp, err := c.SignUp(context.Background(), &accountsv1.SignUpRequest{Email: email, Password: password, AccountName: "Acme Travel", Currency: "EUR"})
	if err != nil {
		t.Fatalf("SignUp(%s): %v", email, err)
	}
	return resp
}

// wantMsg is wantTwirp that also checks the message.
func wantMsg(t *testing.T, what string, err error, code twirp.ErrorCode, msg string) {
	t.Helper()
	wantTwirp(t, what, err, code, "")
	if twerr, ok := err.(twirp.Error); ok && twerr.Msg() != msg {
		t.Errorf("%s: message %q, want %q", what, twerr.Msg(), msg)
	}
}

func TestSignUpSignInAndGetSession(t *testing.T) {
	ctx := context.Background()
	portal, operator, _, _ := newPortalClient(t)

	up := signUp(t, portal, "  Ann@Example.COM ")
	s := up.GetSession()
	if !strings.HasPrefix(up.GetToken(), "ps_") || len(up.GetToken()) != 3+43 {
		t.Errorf("token %q: want ps_ and 43 base64url characters", up.GetToken())
	}
	if s.GetUser().GetEmail() != "ann@example.com" || s.GetUser().GetAccountId() != s.GetAccount().GetId() || s.GetUser().GetId() == "" {
		t.Errorf("session user = %v; want the lower-cased email in the new account", s.GetUser())
	}
	if a := s.GetAccount(); a.GetName() != "Acme Travel" || a.GetCurrency() != "EUR" || a.GetLiveEnabled() {
		t.Errorf("signed-up account = %v; want the name, EUR and live disabled", a)
	}
	if got := s.GetExpiresAt().AsTime().Sub(s.GetUser().GetCreatedAt().AsTime()); got != time.Hour {
		t.Errorf("session lasts %s, want the configured hour", got)
	}
	got, err := portal.GetSession(ctx, &accountsv1.GetSessionRequest{Token: up.GetToken()})
	if err != nil || got.GetUser().GetId() != s.GetUser().GetId() || got.GetAccount().GetId() != s.GetAccount().GetId() {
		t.Errorf("GetSession = %v, %v; want the signed-up user", got, err)
	}
	a, err := operator.GetAccount(ctx, &accountsv1.GetAccountRequest{Id: s.GetAccount().GetId()})
	if err != nil || a.GetLiveEnabled() {
		t.Errorf("GetAccount = %v, %v; want live disabled", a, err)
	}

	in, err := portal.SignIn(ctx, &accountsv1.SignInRequest{Email: "ANN@example.com", Password: password})
	if err != nil || in.GetSession().GetUser().GetId() != s.GetUser().GetId() || in.GetToken() == up.GetToken() {
		t.Fatalf("SignIn = %v, %v; want a new session of the same user", in, err)
	}
	// Both sessions are live.
	for _, token := range []string{up.GetToken(), in.GetToken()} {
		if _, err := portal.GetSession(ctx, &accountsv1.GetSessionRequest{Token: token}); err != nil {
			t.Errorf("GetSession: %v", err)
		}
	}
}

func TestSignUpRefusals(t *testing.T) {
	ctx := context.Background()
	portal, operator, _, _ := newPortalClient(t)
	signUp(t, portal, "ann@example.com")

	for _, tc := range []struct {
		what string
		req  *accountsv1.SignUpRequest
		arg  string
	}{
		{"bad email", &accountsv1.SignUpRequest{Email: "ann", Password: password, AccountName: "X"}, "email"},
		{"named email", &accountsv1.SignUpRequest{Email: "Ann <bob@example.com>", Password: password, AccountName: "X"}, "email"},
		{"long email", &accountsv1.SignUpRequest{Email: strings.Repeat("a", 250) + "@b.co", Password: password, AccountName: "X"}, "email"},
		{"short password", &accountsv1.SignUpRequest{Email: "bob@example.com", Password: "123456789", AccountName: "X"}, "password"},
		{"long password", &accountsv1.SignUpRequest{Email: "bob@example.com", Password: strings.Repeat("p", 129), AccountName: "X"}, "password"},
		{"no account name", &accountsv1.SignUpRequest{Email: "bob@example.com", Password: password}, "account_name"},
		{"long account name", &accountsv1.SignUpRequest{Email: "bob@example.com", Password: password, AccountName: strings.Repeat("n", 121)}, "account_name"},
		{"bad currency", &accountsv1.SignUpRequest{Email: "bob@example.com", Password: password, AccountName: "X", Currency: "JPY"}, "currency"},
	} {
		_, err := portal.SignUp(ctx, tc.req)
		wantTwirp(t, tc.what, err, twirp.InvalidArgument, tc.arg)
	}

	// A registered email, in any case: already_exists on email, and no
	// second account is left behind.
	_, err := portal.SignUp(ctx, &accountsv1.SignUpRequest{Email: "ANN@example.com", Password: password, AccountName: "Other"})
	wantTwirp(t, "taken email", err, twirp.AlreadyExists, "email")
	if list, err := operator.ListAccounts(ctx, &accountsv1.ListAccountsRequest{}); err != nil || list.GetTotal() != 1 {
		t.Errorf("accounts after a refused sign-up: %d (%v), want 1", list.GetTotal(), err)
	}
}

// TestSignInDoesNotTellUnknownFromWrong: an unknown email and a wrong
// password get the same code and message.
func TestSignInDoesNotTellUnknownFromWrong(t *testing.T) {
	ctx := context.Background()
	portal, _, _, _ := newPortalClient(t)
	signUp(t, portal, "ann@example.com")

	const msg = "email or password is incorrect"
	_, err := portal.SignIn(ctx, &accountsv1.SignInRequest{Email: "ann@example.com", Password: "wrong password!"})
	wantMsg(t, "wrong password", err, twirp.Unauthenticated, msg)
	_, err = portal.SignIn(ctx, &accountsv1.SignInRequest{Email: "nobody@example.com", Password: password})
	wantMsg(t, "unknown email", err, twirp.Unauthenticated, msg)
	_, err = portal.SignIn(ctx, &accountsv1.SignInRequest{Email: "not an email", Password: password})
	wantMsg(t, "malformed email", err, twirp.Unauthenticated, msg)
	_, err = portal.SignIn(ctx, &accountsv1.SignInRequest{Email: "ann@example.com"})
	wantMsg(t, "no password", err, twirp.Unauthenticated, msg)

	// Both paths run one Argon2id verification: their times are alike.
	// Generous bounds keep this from flaking on a busy machine; what it
	// catches is a path that skips the hash (microseconds against tens of
	// milliseconds).
	timed := func(email string) time.Duration {
		start := time.Now()
		_, _ = portal.SignIn(ctx, &accountsv1.SignInRequest{Email: email, Password: "wrong password!"})
		return time.Since(start)
	}
	var known, unknown time.Duration
	for range 3 {
		known += timed("ann@example.com")
		unknown += timed("nobody@example.com")
	}
	if unknown < known/3 {
		t.Errorf("unknown emails answer in %s, wrong passwords in %s: the unknown path skips the hash", unknown/3, known/3)
	}
}

func TestSessionExpires(t *testing.T) {
	ctx := context.Background()
	portal, _, _, clk := newPortalClient(t)
	up := signUp(t, portal, "ann@example.com")

	clk.advance(time.Hour - time.Second)
	if _, err := portal.GetSession(ctx, &accountsv1.GetSessionRequest{Token: up.GetToken()}); err != nil {
		t.Fatalf("GetSession before expiry: %v", err)
	}
	clk.advance(time.Second)
	_, err := portal.GetSession(ctx, &accountsv1.GetSessionRequest{Token: up.GetToken()})
	wantTwirp(t, "expired session", err, twirp.Unauthenticated, "")
	_, err = portal.SignOut(ctx, &accountsv1.SignOutRequest{Token: up.GetToken()})
	wantTwirp(t, "sign out of an expired session", err, twirp.Unauthenticated, "")

	for _, token := range []string{"", "ps_", "ps_" + strings.Repeat("A", 43), "sk_live_x", up.GetToken()[:20]} {
		_, err := portal.GetSession(ctx, &accountsv1.GetSessionRequest{Token: token})
		wantTwirp(t, "GetSession("+token+")", err, twirp.Unauthenticated, "")
	}
}

func TestSignOut(t *testing.T) {
	ctx := context.Background()
	portal, _, _, _ := newPortalClient(t)
	first := signUp(t, portal, "ann@example.com").GetToken()
	signIn := func() string {
		t.Helper()
		resp, err := portal.SignIn(ctx, &accountsv1.SignInRequest{Email: "ann@example.com", Password: password})
		if err != nil {
			t.Fatal(err)
		}
		return resp.GetToken()
	}
	second, third := signIn(), signIn()
	other := signUp(t, portal, "bob@example.com").GetToken()
	live := func(token string) bool {
		_, err := portal.GetSession(ctx, &accountsv1.GetSessionRequest{Token: token})
		return err == nil
	}

	if _, err := portal.SignOut(ctx, &accountsv1.SignOutRequest{Token: first}); err != nil {
		t.Fatalf("SignOut: %v", err)
	}
	if live(first) || !live(second) || !live(third) {
		t.Errorf("after signing out one session: live %v %v %v, want only the others", live(first), live(second), live(third))
	}
	// A revoked token can neither sign out again nor end the others.
	_, err := portal.SignOut(ctx, &accountsv1.SignOutRequest{Token: first, Everywhere: true})
	wantTwirp(t, "sign out with a revoked token", err, twirp.Unauthenticated, "")
	if !live(second) {
		t.Error("a revoked token signed its user out everywhere")
	}

	if _, err := portal.SignOut(ctx, &accountsv1.SignOutRequest{Token: second, Everywhere: true}); err != nil {
		t.Fatalf("SignOut everywhere: %v", err)
	}
	if live(second) || live(third) || !live(other) {
		t.Errorf("after signing out everywhere: live %v %v, other user %v; want only the other user's", live(second), live(third), live(other))
	}
}

func TestChangePassword(t *testing.T) {
	ctx := context.Background()
	portal, _, _, _ := newPortalClient(t)
	first := signUp(t, portal, "ann@example.com").GetToken()
	in, err := portal.SignIn(ctx, &accountsv1.SignInRequest{Email: "ann@example.com", Password: password})
	if err != nil {
		t.Fatal(err)
	}
	second := in.GetToken()
	const next = "a brand new passphrase"

	_, err = portal.ChangePassword(ctx, &accountsv1.ChangePasswordRequest{Token: first, CurrentPassword: "not the password", NewPassword: next})
	wantTwirp(t, "wrong current password", err, twirp.InvalidArgument, "current_password")
	if twerr, ok := err.(twirp.Error); ok && twerr.Meta("reason") != "is not your current password" {
		t.Errorf("reason %q", twerr.Meta("reason"))
	}
	_, err = portal.ChangePassword(ctx, &accountsv1.ChangePasswordRequest{Token: first, CurrentPassword: password, NewPassword: "short"})
	wantTwirp(t, "short new password", err, twirp.InvalidArgument, "new_password")
	_, err = portal.ChangePassword(ctx, &accountsv1.ChangePasswordRequest{Token: "ps_nope", CurrentPassword: password, NewPassword: next})
	wantTwirp(t, "no session", err, twirp.Unauthenticated, "")

	changed, err := portal.ChangePassword(ctx, &accountsv1.ChangePasswordRequest{Token: first, CurrentPassword: password, NewPassword: next})
	if err != nil {
		t.Fatalf("ChangePassword: %v", err)
	}
	// Every earlier session ended, the caller's included; the new one works.
	for _, token := range []string{first, second} {
		_, err := portal.GetSession(ctx, &accountsv1.GetSessionRequest{Token: token})
		wantTwirp(t, "a session from before the change", err, twirp.Unauthenticated, "")
	}
	if _, err := portal.GetSession(ctx, &accountsv1.GetSessionRequest{Token: changed.GetToken()}); err != nil {
		t.Errorf("the new session: %v", err)
	}
	_, err = portal.SignIn(ctx, &accountsv1.SignInRequest{Email: "ann@example.com", Password: password})
	wantTwirp(t, "the old password", err, twirp.Unauthenticated, "")
	if _, err := portal.SignIn(ctx, &accountsv1.SignInRequest{Email: "ann@example.com", Password: next}); err != nil {
		t.Errorf("the new password: %v", err)
	}
}

func TestInviteAndAccept(t *testing.T) {
	ctx := context.Background()
	portal, operator, _, clk := newPortalClient(t)
	a := createAccount(t, operator, "GBP")

	_, err := operator.InviteUser(ctx, &accountsv1.InviteUserRequest{AccountId: a.GetId(), Email: "not an email"})
	wantTwirp(t, "bad email", err, twirp.InvalidArgument, "email")
	_, err = operator.InviteUser(ctx, &accountsv1.InviteUserRequest{AccountId: "0195f0c4-1c2d-7abc-8def-0123456789ab", Email: "cat@example.com"})
	wantTwirp(t, "unknown account", err, twirp.NotFound, "")
	_, err = operator.InviteUser(ctx, &accountsv1.InviteUserRequest{AccountId: "x", Email: "cat@example.com"})
	wantTwirp(t, "malformed account", err, twirp.NotFound, "")
	signUp(t, portal, "ann@example.com")
	_, err = operator.InviteUser(ctx, &accountsv1.InviteUserRequest{AccountId: a.GetId(), Email: "Ann@example.com"})
	wantTwirp(t, "another account's email", err, twirp.AlreadyExists, "email")

	inv, err := operator.InviteUser(ctx, &accountsv1.InviteUserRequest{AccountId: a.GetId(), Email: "Cat@Example.com"})
	if err != nil {
		t.Fatalf("InviteUser: %v", err)
	}
	if !strings.HasPrefix(inv.GetToken(), "pi_") || len(inv.GetToken()) != 3+43 {
		t.Errorf("invite token %q: want pi_ and 43 base64url characters", inv.GetToken())
	}
	if got := inv.GetExpiresAt().AsTime().Sub(clk.Now()); got < 24*time.Hour-time.Second || got > 24*time.Hour {
		t.Errorf("invite expires in %s, want the configured 24h", got)
	}

	_, err = portal.AcceptInvite(ctx, &accountsv1.AcceptInviteRequest{Token: inv.GetToken(), Password: "short"})
	wantTwirp(t, "short password", err, twirp.InvalidArgument, "password")
	accepted, err := portal.AcceptInvite(ctx, &accountsv1.AcceptInviteRequest{Token: inv.GetToken(), Password: password})
	if err != nil {
		t.Fatalf("AcceptInvite: %v", err)
	}
	s := accepted.GetSession()
	if s.GetUser().GetEmail() != "cat@example.com" || s.GetAccount().GetId() != a.GetId() || !s.GetAccount().GetLiveEnabled() {
		t.Errorf("accepted session = %v; want cat in the operator's account, live enabled", s)
	}
	if _, err := portal.GetSession(ctx, &accountsv1.GetSessionRequest{Token: accepted.GetToken()}); err != nil {
		t.Errorf("GetSession after accepting: %v", err)
	}
	if _, err := portal.SignIn(ctx, &accountsv1.SignInRequest{Email: "cat@example.com", Password: password}); err != nil {
		t.Errorf("SignIn after accepting: %v", err)
	}

	const gone = "invite not found, used or expired"
	_, err = portal.AcceptInvite(ctx, &accountsv1.AcceptInviteRequest{Token: inv.GetToken(), Password: password})
	wantMsg(t, "a used invite", err, twirp.NotFound, gone)
	_, err = portal.AcceptInvite(ctx, &accountsv1.AcceptInviteRequest{Token: "pi_" + strings.Repeat("A", 43), Password: password})
	wantMsg(t, "an unknown invite", err, twirp.NotFound, gone)
	_, err = portal.AcceptInvite(ctx, &accountsv1.AcceptInviteRequest{Token: "garbage", Password: password})
	wantMsg(t, "a malformed invite", err, twirp.NotFound, gone)

	late, err := operator.InviteUser(ctx, &accountsv1.InviteUserRequest{AccountId: a.GetId(), Email: "dan@example.com"})
	if err != nil {
		t.Fatal(err)
	}
	clk.advance(24 * time.Hour)
	_, err = portal.AcceptInvite(ctx, &accountsv1.AcceptInviteRequest{Token: late.GetToken(), Password: password})
	wantMsg(t, "an expired invite", err, twirp.NotFound, gone)
}

// TestInviteResetsAnExistingUsersPassword: inviting a user of the same
// account again is how an operator gives them a new password; their
// sessions end.
func TestInviteResetsAnExistingUsersPassword(t *testing.T) {
	ctx := context.Background()
	portal, operator, _, _ := newPortalClient(t)
	up := signUp(t, portal, "ann@example.com")
	accountID := up.GetSession().GetAccount().GetId()

	inv, err := operator.InviteUser(ctx, &accountsv1.InviteUserRequest{AccountId: accountID, Email: "ann@example.com"})
	if err != nil {
		t.Fatalf("InviteUser for an existing user of the account: %v", err)
	}
	const next = "the operator's fresh one"
	accepted, err := portal.AcceptInvite(ctx, &accountsv1.AcceptInviteRequest{Token: inv.GetToken(), Password: next})
	if err != nil {
		t.Fatalf("AcceptInvite: %v", err)
	}
	if accepted.GetSession().GetUser().GetId() != up.GetSession().GetUser().GetId() {
		t.Errorf("accepting made user %s, want the existing %s", accepted.GetSession().GetUser().GetId(), up.GetSession().GetUser().GetId())
	}
	_, err = portal.GetSession(ctx, &accountsv1.GetSessionRequest{Token: up.GetToken()})
	wantTwirp(t, "a session from before the reset", err, twirp.Unauthenticated, "")
	_, err = portal.SignIn(ctx, &accountsv1.SignInRequest{Email: "ann@example.com", Password: password})
	wantTwirp(t, "the old password", err, twirp.Unauthenticated, "")
	if _, err := portal.SignIn(ctx, &accountsv1.SignInRequest{Email: "ann@example.com", Password: next}); err != nil {
		t.Errorf("the reset password: %v", err)
	}
}

// TestInviteForAnEmailSignedUpMeanwhile: the email became another
// account's user after the invite was made; accepting is refused and
// changes nothing, the invite included.
func TestInviteForAnEmailSignedUpMeanwhile(t *testing.T) {
	ctx := context.Background()
	portal, operator, _, _ := newPortalClient(t)
	a := createAccount(t, operator, "")
	inv, err := operator.InviteUser(ctx, &accountsv1.InviteUserRequest{AccountId: a.GetId(), Email: "ann@example.com"})
	if err != nil {
		t.Fatal(err)
	}
	signUp(t, portal, "ann@example.com")
	_, err = portal.AcceptInvite(ctx, &accountsv1.AcceptInviteRequest{Token: inv.GetToken(), Password: "another password"})
	wantTwirp(t, "accept for another account's email", err, twirp.AlreadyExists, "email")
	if _, err := portal.SignIn(ctx, &accountsv1.SignInRequest{Email: "ann@example.com", Password: password}); err != nil {
		t.Errorf("the signed-up user's password changed: %v", err)
	}
}

// TestInviteIsSpentOnce: two accepts of one token race; exactly one
// succeeds, and only its password works.
func TestInviteIsSpentOnce(t *testing.T) {
	ctx := context.Background()
	portal, operator, pool, _ := newPortalClient(t)
	a := createAccount(t, operator, "")
	for round := range 3 {
		email := []string{"ann@example.com", "bob@example.com", "cat@example.com"}[round]
		inv, err := operator.InviteUser(ctx, &accountsv1.InviteUserRequest{AccountId: a.GetId(), Email: email})
		if err != nil {
			t.Fatal(err)
		}
		passwords := []string{"first racer password", "second racer password"}
		errs := make([]error, len(passwords))
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i, pw := range passwords {
			wg.Go(func() {
				<-start
				_, errs[i] = portal.AcceptInvite(ctx, &accountsv1.AcceptInviteRequest{Token: inv.GetToken(), Password: pw})
			})
		}
		close(start)
		wg.Wait()
		winner := -1
		for i, err := range errs {
			if err == nil {
				if winner >= 0 {
					t.Fatalf("round %d: both accepts of one invite succeeded", round)
				}
				winner = i
				continue
			}
			wantTwirp(t, "the losing accept", err, twirp.NotFound, "")
		}
		if winner < 0 {
			t.Fatalf("round %d: neither accept succeeded: %v", round, errs)
		}
		var sessions int
		if err := pool.QueryRow(ctx, "SELECT count(*) FROM sessions s JOIN users u ON u.id = s.user_id WHERE u.email = $1", email).Scan(&sessions); err != nil || sessions != 1 {
			t.Errorf("round %d: %d sessions (%v), want the winner's one", round, sessions, err)
		}
		if _, err := portal.SignIn(ctx, &accountsv1.SignInRequest{Email: email, Password: passwords[winner]}); err != nil {
			t.Errorf("round %d: the winner's password: %v", round, err)
		}
	}
}

func TestLiveKeysWaitForEnableLive(t *testing.T) {
	ctx := context.Background()
	portal, operator, _, _ := newPortalClient(t)
	up := signUp(t, portal, "ann@example.com")
	accountID := up.GetSession().GetAccount().GetId()

	_, err := portal.CreateKey(ctx, &accountsv1.CreateKeyRequest{AccountId: accountID, Environment: accountsv1.Environment_ENVIRONMENT_LIVE})
	wantTwirp(t, "live key before EnableLive", err, twirp.FailedPrecondition, "")
	if twerr, ok := err.(twirp.Error); ok {
		if twerr.Meta("reason") != "live_disabled" || !strings.Contains(twerr.Msg(), "esimctl accounts enable-live") {
			t.Errorf("refusal %q %v; want reason live_disabled and the way out in the message", twerr.Msg(), twerr.MetaMap())
		}
	}
	if keys, err := portal.ListKeys(ctx, &accountsv1.ListKeysRequest{AccountId: accountID}); err != nil || keys.GetTotal() != 0 {
		t.Errorf("keys after a refused live key: %v, %v", keys, err)
	}
	if _, err := portal.CreateKey(ctx, &accountsv1.CreateKeyRequest{AccountId: accountID, Environment: accountsv1.Environment_ENVIRONMENT_SANDBOX}); err != nil {
		t.Errorf("sandbox key before EnableLive: %v", err)
	}

	_, err = operator.EnableLive(ctx, &accountsv1.EnableLiveRequest{AccountId: "0195f0c4-1c2d-7abc-8def-0123456789ab"})
	wantTwirp(t, "EnableLive of an unknown account", err, twirp.NotFound, "")
	_, err = operator.EnableLive(ctx, &accountsv1.EnableLiveRequest{AccountId: "nope"})
	wantTwirp(t, "EnableLive of a malformed id", err, twirp.NotFound, "")
	for range 2 { // idempotent
		a, err := operator.EnableLive(ctx, &accountsv1.EnableLiveRequest{AccountId: accountID})
		if err != nil || !a.GetLiveEnabled() || a.GetId() != accountID {
			t.Fatalf("EnableLive = %v, %v", a, err)
		}
	}
	if _, err := portal.CreateKey(ctx, &accountsv1.CreateKeyRequest{AccountId: accountID, Environment: accountsv1.Environment_ENVIRONMENT_LIVE}); err != nil {
		t.Errorf("live key after EnableLive: %v", err)
	}
	s, err := portal.GetSession(ctx, &accountsv1.GetSessionRequest{Token: up.GetToken()})
	if err != nil || !s.GetAccount().GetLiveEnabled() {
		t.Errorf("GetSession after EnableLive = %v, %v; want live enabled", s, err)
	}

	// Operators' accounts have live from the start.
	a := createAccount(t, operator, "")
	if !a.GetLiveEnabled() {
		t.Errorf("operator-created account %v: want live enabled", a)
	}
	_, err = operator.CreateKey(ctx, &accountsv1.CreateKeyRequest{AccountId: "0195f0c4-1c2d-7abc-8def-0123456789ab", Environment: accountsv1.Environment_ENVIRONMENT_LIVE})
	wantTwirp(t, "live key of an unknown account", err, twirp.NotFound, "")
}

// TestPortalCallerIsFenced: the portal reaches its methods and the keys
// of an account, never the operators' methods; operators and the gateway
// cannot sign anyone in.
func TestPortalCallerIsFenced(t *testing.T) {
	ctx := context.Background()
	portal, operator, pool, _ := newPortalClient(t)
	up := signUp(t, portal, "ann@example.com")
	accountID := up.GetSession().GetAccount().GetId()
	before := tables(t, pool)

	denied := func(what string, err error) {
		t.Helper()
		wantTwirp(t, what, err, twirp.PermissionDenied, "")
	}
	_, err := portal.CreatePasswordReset(ctx, &accountsv1.CreatePasswordResetRequest{Email: "ann@example.com"})
	denied("portal CreatePasswordReset", err)
	_, err = portal.ListLiveRequests(ctx, &accountsv1.ListLiveRequestsRequest{})
	denied("portal ListLiveRequests", err)
	_, err = operator.RequestLive(ctx, &accountsv1.RequestLiveRequest{AccountId: accountID, UserId: up.GetSession().GetUser().GetId()})
	denied("operator RequestLive", err)
	_, err = operator.ResetPassword(ctx, &accountsv1.ResetPasswordRequest{Token: "pr_x", Password: password})
	denied("operator ResetPassword", err)
	_, err = portal.EnableLive(ctx, &accountsv1.EnableLiveRequest{AccountId: accountID})
	denied("portal EnableLive", err)
	_, err = portal.ListAccounts(ctx, &accountsv1.ListAccountsRequest{})
	denied("portal ListAccounts", err)
	_, err = portal.CreateAccount(ctx, &accountsv1.CreateAccountRequest{Name: "x"})
	denied("portal CreateAccount", err)
	_, err = portal.SetRateLimit(ctx, &accountsv1.SetRateLimitRequest{AccountId: accountID, RateLimitPerMinute: 5})
	denied("portal SetRateLimit", err)
	_, err = portal.Authenticate(ctx, &accountsv1.AuthenticateRequest{Secret: "sk_live_x"})
	denied("portal Authenticate", err)
	_, err = operator.SignIn(ctx, &accountsv1.SignInRequest{Email: "ann@example.com", Password: password})
	denied("operator SignIn", err)
	_, err = operator.SignUp(ctx, &accountsv1.SignUpRequest{Email: "bob@example.com", Password: password, AccountName: "x"})
	denied("operator SignUp", err)
	if after := tables(t, pool); after != before {
		t.Errorf("refused calls changed rows:\n%s\n%s", before, after)
	}

	if _, err := portal.GetAccount(ctx, &accountsv1.GetAccountRequest{Id: accountID}); err != nil {
		t.Errorf("portal GetAccount: %v", err)
	}
	k, err := portal.CreateKey(ctx, &accountsv1.CreateKeyRequest{AccountId: accountID, Environment: accountsv1.Environment_ENVIRONMENT_SANDBOX})
	if err != nil {
		t.Fatalf("portal CreateKey: %v", err)
	}
	if _, err := portal.RevokeKey(ctx, &accountsv1.RevokeKeyRequest{AccountId: accountID, KeyId: k.GetKey().GetId()}); err != nil {
		t.Errorf("portal RevokeKey: %v", err)
	}
}

// TestNoPlaintextCredentialInTheDatabase: after every kind of write, no
// password and no token appears anywhere in the database, and what is
// stored is what the schema promises.
func TestNoPlaintextCredentialInTheDatabase(t *testing.T) {
	ctx := context.Background()
	portal, operator, pool, _ := newPortalClient(t)
	up := signUp(t, portal, "ann@example.com")
	accountID := up.GetSession().GetAccount().GetId()
	in, err := portal.SignIn(ctx, &accountsv1.SignInRequest{Email: "ann@example.com", Password: password})
	if err != nil {
		t.Fatal(err)
	}
	const next = "changed passphrase 42"
	changed, err := portal.ChangePassword(ctx, &accountsv1.ChangePasswordRequest{Token: in.GetToken(), CurrentPassword: password, NewPassword: next})
	if err != nil {
		t.Fatal(err)
	}
	inv, err := operator.InviteUser(ctx, &accountsv1.InviteUserRequest{AccountId: accountID, Email: "bob@example.com"})
	if err != nil {
		t.Fatal(err)
	}
	const bobs = "bob's own passphrase"
	accepted, err := portal.AcceptInvite(ctx, &accountsv1.AcceptInviteRequest{Token: inv.GetToken(), Password: bobs})
	if err != nil {
		t.Fatal(err)
	}

	var dump string
	if err := pool.QueryRow(ctx, `SELECT
		coalesce((SELECT json_agg(u)::text FROM users u), '') ||
		coalesce((SELECT json_agg(s)::text FROM sessions s), '') ||
		coalesce((SELECT json_agg(i)::text FROM invites i), '') ||
		coalesce((SELECT json_agg(a)::text FROM accounts a), '')`).Scan(&dump); err != nil {
		t.Fatal(err)
	}
	secrets := []string{password, next, bobs, up.GetToken(), in.GetToken(), changed.GetToken(), inv.GetToken(), accepted.GetToken()}
	for _, s := range secrets {
		random := strings.TrimPrefix(strings.TrimPrefix(s, "ps_"), "pi_")
		if strings.Contains(dump, s) || strings.Contains(dump, random) || strings.Contains(dump, hex.EncodeToString([]byte(s))) {
			t.Errorf("the database holds a password or token in plain text:\n%s", dump)
		}
	}
	var hashes []string
	rows, err := pool.Query(ctx, "SELECT password_hash FROM users")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var h string
		if err := rows.Scan(&h); err != nil {
			t.Fatal(err)
		}
		hashes = append(hashes, h)
	}
	if len(hashes) != 2 {
		t.Fatalf("%d users, want 2", len(hashes))
	}
	for _, h := range hashes {
		if !strings.HasPrefix(h, "$argon2id$v=19$m=19456,t=2,p=1$") {
			t.Errorf("password_hash %q is not an Argon2id PHC string with the chosen costs", h)
		}
	}
	for _, token := range []string{up.GetToken(), in.GetToken(), changed.GetToken(), accepted.GetToken()} {
		sum := sha256.Sum256([]byte(token))
		var n int
		if err := pool.QueryRow(ctx, "SELECT count(*) FROM sessions WHERE token_hash = $1", sum[:]).Scan(&n); err != nil || n != 1 {
			t.Errorf("no session row keyed by the SHA-256 of its token (%d, %v)", n, err)
		}
	}
	sum := sha256.Sum256([]byte(inv.GetToken()))
	var used bool
	if err := pool.QueryRow(ctx, "SELECT used_at IS NOT NULL FROM invites WHERE token_hash = $1", sum[:]).Scan(&used); err != nil || !used {
		t.Errorf("invite row by the SHA-256 of its token: used %v, %v", used, err)
	}
}
