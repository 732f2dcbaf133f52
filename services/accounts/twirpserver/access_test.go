package twirpserver_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/twitchtv/twirp"

	accountsv1 "github.com/esimplatform/esim/proto/accounts/v1"
)

// invite makes an invite to the account from the portal, as a colleague
// does, and accepts it with password.
func invite(t *testing.T, portal accountsv1.Accounts, accountID, email string) *accountsv1.SessionResponse {
	t.Helper()
	ctx := context.Background()
	inv, err := portal.InviteUser(ctx, &accountsv1.InviteUserRequest{AccountId: accountID, Email: email})
	if err != nil {
		t.Fatalf("InviteUser(%s): %v", email, err)
	}
	accepted, err := portal.AcceptInvite(ctx, &accountsv1.AcceptInviteRequest{Token: inv.GetToken(), Password: password})
	if err != nil {
		t.Fatalf("AcceptInvite(%s): %v", email, err)
	}
	return accepted
}

// unchanged fails the test when the tables differ from before: a refused
// call must change nothing.
func unchanged(t *testing.T, what, before, after string) {
	t.Helper()
	if before != after {
		t.Errorf("%s changed rows:\n%s\n%s", what, before, after)
	}
}

func emails(users []*accountsv1.User) string {
	var out []string
	for _, u := range users {
		out = append(out, u.GetEmail())
	}
	return strings.Join(out, ",")
}

func TestListAndRemoveUsers(t *testing.T) {
	ctx := context.Background()
	portal, operator, pool, _ := newPortalClient(t)
	ann := signUp(t, portal, "ann@example.com")
	accountID := ann.GetSession().GetAccount().GetId()
	bob := invite(t, portal, accountID, "bob@example.com")
	other := signUp(t, portal, "cat@example.com")

	list, err := portal.ListUsers(ctx, &accountsv1.ListUsersRequest{AccountId: accountID})
	if err != nil || emails(list.GetUsers()) != "ann@example.com,bob@example.com" {
		t.Fatalf("ListUsers = %v, %v; want ann then bob", list, err)
	}
	if u := list.GetUsers()[1]; u.GetId() != bob.GetSession().GetUser().GetId() || u.GetAccountId() != accountID || u.GetCreatedAt() == nil {
		t.Errorf("bob listed as %v", u)
	}

	// Refusals, each changing nothing.
	before := tables(t, pool)
	_, err = portal.InviteUser(ctx, &accountsv1.InviteUserRequest{AccountId: accountID, Email: "BOB@example.com", NewUserOnly: true})
	wantTwirp(t, "a new-user-only invite of a user", err, twirp.AlreadyExists, "email")
	var conflict twirp.Error
	if errors.As(err, &conflict) && conflict.Meta("reason") != "is already a user of this account" {
		t.Errorf("new-user-only invite of a user: reason %q", conflict.Meta("reason"))
	}
	_, err = portal.ListUsers(ctx, &accountsv1.ListUsersRequest{AccountId: uuid.NewString()})
	wantTwirp(t, "ListUsers of an unknown account", err, twirp.NotFound, "")
	_, err = portal.ListUsers(ctx, &accountsv1.ListUsersRequest{AccountId: "nope"})
	wantTwirp(t, "ListUsers of a malformed id", err, twirp.NotFound, "")
	_, err = portal.RemoveUser(ctx, &accountsv1.RemoveUserRequest{AccountId: accountID, UserId: other.GetSession().GetUser().GetId()})
	wantTwirp(t, "RemoveUser of another account's user", err, twirp.NotFound, "")
	_, err = portal.RemoveUser(ctx, &accountsv1.RemoveUserRequest{AccountId: accountID, UserId: uuid.NewString()})
	wantTwirp(t, "RemoveUser of an unknown user", err, twirp.NotFound, "")
	_, err = portal.RemoveUser(ctx, &accountsv1.RemoveUserRequest{AccountId: uuid.NewString(), UserId: bob.GetSession().GetUser().GetId()})
	wantTwirp(t, "RemoveUser in an unknown account", err, twirp.NotFound, "")
	_, err = portal.RemoveUser(ctx, &accountsv1.RemoveUserRequest{AccountId: accountID, UserId: "x"})
	wantTwirp(t, "RemoveUser of a malformed id", err, twirp.NotFound, "")
	_, err = portal.RemoveUser(ctx, &accountsv1.RemoveUserRequest{AccountId: other.GetSession().GetAccount().GetId(), UserId: other.GetSession().GetUser().GetId()})
	wantTwirp(t, "RemoveUser of the last user", err, twirp.FailedPrecondition, "")
	var twerr twirp.Error
	if errors.As(err, &twerr) && (twerr.Meta("reason") != "last_user" || !strings.Contains(twerr.Msg(), "last user")) {
		t.Errorf("last user: reason %q, message %q", twerr.Meta("reason"), twerr.Msg())
	}
	unchanged(t, "refused ListUsers and RemoveUser", before, tables(t, pool))

	// Bob, signed in twice, is removed: both sessions end, and so does his
	// password.
	again, err := portal.SignIn(ctx, &accountsv1.SignInRequest{Email: "bob@example.com", Password: password})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := portal.RemoveUser(ctx, &accountsv1.RemoveUserRequest{AccountId: accountID, UserId: bob.GetSession().GetUser().GetId()}); err != nil {
		t.Fatalf("RemoveUser bob: %v", err)
	}
	for _, token := range []string{bob.GetToken(), again.GetToken()} {
		_, err := portal.GetSession(ctx, &accountsv1.GetSessionRequest{Token: token})
		wantTwirp(t, "a removed user's session", err, twirp.Unauthenticated, "")
	}
	_, err = portal.SignIn(ctx, &accountsv1.SignInRequest{Email: "bob@example.com", Password: password})
	wantTwirp(t, "a removed user's sign-in", err, twirp.Unauthenticated, "")
	if _, err := portal.GetSession(ctx, &accountsv1.GetSessionRequest{Token: ann.GetToken()}); err != nil {
		t.Errorf("ann's session after bob's removal: %v", err)
	}
	list, err = operator.ListUsers(ctx, &accountsv1.ListUsersRequest{AccountId: accountID})
	if err != nil || emails(list.GetUsers()) != "ann@example.com" {
		t.Errorf("ListUsers after removal = %v, %v", list, err)
	}

	// Ann is now the last: she cannot remove herself.
	before = tables(t, pool)
	_, err = portal.RemoveUser(ctx, &accountsv1.RemoveUserRequest{AccountId: accountID, UserId: ann.GetSession().GetUser().GetId()})
	wantTwirp(t, "RemoveUser of oneself, the last user", err, twirp.FailedPrecondition, "")
	unchanged(t, "refused self-removal", before, tables(t, pool))

	// The removed email may be invited back.
	invite(t, portal, accountID, "bob@example.com")
}

func TestGetInvite(t *testing.T) {
	ctx := context.Background()
	portal, operator, pool, clk := newPortalClient(t)
	ann := signUp(t, portal, "ann@example.com")
	accountID := ann.GetSession().GetAccount().GetId()
	inv, err := portal.InviteUser(ctx, &accountsv1.InviteUserRequest{AccountId: accountID, Email: " Bob@Example.com"})
	if err != nil {
		t.Fatal(err)
	}
	got, err := portal.GetInvite(ctx, &accountsv1.GetInviteRequest{Token: inv.GetToken()})
	if err != nil || got.GetAccountId() != accountID || got.GetAccountName() != "Acme Travel" || got.GetEmail() != "bob@example.com" ||
		got.GetExistingUser() || !got.GetExpiresAt().AsTime().Equal(inv.GetExpiresAt().AsTime()) {
		t.Fatalf("GetInvite = %v, %v", got, err)
	}
	reset, err := operator.InviteUser(ctx, &accountsv1.InviteUserRequest{AccountId: accountID, Email: "ann@example.com"})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := portal.GetInvite(ctx, &accountsv1.GetInviteRequest{Token: reset.GetToken()}); err != nil || !got.GetExistingUser() {
		t.Errorf("GetInvite of an existing user's email = %v, %v; want existing_user", got, err)
	}

	// A dead link: garbage, unknown, used, expired, or for an email that
	// signed up elsewhere meanwhile.
	dead := func(what, token string) {
		t.Helper()
		before := tables(t, pool)
		_, err := portal.GetInvite(ctx, &accountsv1.GetInviteRequest{Token: token})
		wantMsg(t, what, err, twirp.NotFound, "invite not found, used or expired")
		unchanged(t, what, before, tables(t, pool))
	}
	dead("an empty token", "")
	dead("a malformed token", "pi_x")
	dead("a reset token", "pr_"+strings.TrimPrefix(inv.GetToken(), "pi_"))
	dead("an unknown token", "pi_"+strings.Repeat("A", 43))
	taken, err := portal.InviteUser(ctx, &accountsv1.InviteUserRequest{AccountId: accountID, Email: "cat@example.com"})
	if err != nil {
		t.Fatal(err)
	}
	signUp(t, portal, "cat@example.com")
	dead("an invite whose email signed up elsewhere", taken.GetToken())
	if _, err := portal.AcceptInvite(ctx, &accountsv1.AcceptInviteRequest{Token: inv.GetToken(), Password: password}); err != nil {
		t.Fatal(err)
	}
	dead("a used invite", inv.GetToken())
	clk.advance(24 * time.Hour)
	dead("an expired invite", reset.GetToken())
}

func TestPasswordReset(t *testing.T) {
	ctx := context.Background()
	portal, operator, pool, clk := newPortalClient(t)
	ann := signUp(t, portal, "ann@example.com")
	other, err := portal.SignIn(ctx, &accountsv1.SignInRequest{Email: "ann@example.com", Password: password})
	if err != nil {
		t.Fatal(err)
	}

	// Refusals before any reset exists: nothing is written.
	before := tables(t, pool)
	_, err = operator.CreatePasswordReset(ctx, &accountsv1.CreatePasswordResetRequest{Email: "nobody@example.com"})
	wantTwirp(t, "reset for an unknown email", err, twirp.NotFound, "")
	_, err = operator.CreatePasswordReset(ctx, &accountsv1.CreatePasswordResetRequest{Email: "not an email"})
	wantTwirp(t, "reset for a malformed email", err, twirp.InvalidArgument, "email")
	_, err = operator.CreatePasswordReset(ctx, &accountsv1.CreatePasswordResetRequest{})
	wantTwirp(t, "reset for no email", err, twirp.InvalidArgument, "email")
	unchanged(t, "refused CreatePasswordReset", before, tables(t, pool))

	r, err := operator.CreatePasswordReset(ctx, &accountsv1.CreatePasswordResetRequest{Email: " ANN@example.com "})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(r.GetToken(), "pr_") || len(r.GetToken()) != 3+43 || r.GetUser().GetEmail() != "ann@example.com" ||
		r.GetExpiresAt().AsTime().Sub(clk.Now().Truncate(time.Microsecond)) != 24*time.Hour {
		t.Errorf("CreatePasswordReset = %v; want a pr_ token for ann, valid 24h", r)
	}
	sum := sha256.Sum256([]byte(r.GetToken()))
	var n int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM password_resets WHERE token_hash = $1", sum[:]).Scan(&n); err != nil || n != 1 {
		t.Errorf("no reset row keyed by the SHA-256 of its token (%d, %v)", n, err)
	}
	if strings.Contains(tables(t, pool), strings.TrimPrefix(r.GetToken(), "pr_")) {
		t.Error("the reset token is stored in plain text")
	}
	info, err := portal.GetPasswordReset(ctx, &accountsv1.GetPasswordResetRequest{Token: r.GetToken()})
	if err != nil || info.GetEmail() != "ann@example.com" || info.GetAccountName() != "Acme Travel" {
		t.Errorf("GetPasswordReset = %v, %v", info, err)
	}

	// Refusals of a use: each leaves the reset, the password and the
	// sessions as they were.
	before = tables(t, pool)
	for what, req := range map[string]*accountsv1.ResetPasswordRequest{
		"a short password":   {Token: r.GetToken(), Password: "short"},
		"a malformed token":  {Token: "pr_x", Password: "a brand new passphrase"},
		"an unknown token":   {Token: "pr_" + strings.Repeat("B", 43), Password: "a brand new passphrase"},
		"an invite's prefix": {Token: "pi_" + strings.TrimPrefix(r.GetToken(), "pr_"), Password: "a brand new passphrase"},
	} {
		_, err := portal.ResetPassword(ctx, req)
		if req.Password == "short" {
			wantTwirp(t, "ResetPassword with "+what, err, twirp.InvalidArgument, "password")
		} else {
			wantMsg(t, "ResetPassword with "+what, err, twirp.NotFound, "password reset link not found, used or expired")
		}
	}
	_, err = portal.GetPasswordReset(ctx, &accountsv1.GetPasswordResetRequest{Token: "pr_" + strings.Repeat("B", 43)})
	wantTwirp(t, "GetPasswordReset of an unknown token", err, twirp.NotFound, "")
	unchanged(t, "refused ResetPassword", before, tables(t, pool))

	const next = "a brand new passphrase"
	done, err := portal.ResetPassword(ctx, &accountsv1.ResetPasswordRequest{Token: r.GetToken(), Password: next})
	if err != nil {
		t.Fatalf("ResetPassword: %v", err)
	}
	if done.GetSession().GetUser().GetEmail() != "ann@example.com" || !strings.HasPrefix(done.GetToken(), "ps_") {
		t.Errorf("ResetPassword = %v", done)
	}
	for _, token := range []string{ann.GetToken(), other.GetToken()} {
		_, err := portal.GetSession(ctx, &accountsv1.GetSessionRequest{Token: token})
		wantTwirp(t, "a session from before the reset", err, twirp.Unauthenticated, "")
	}
	if _, err := portal.GetSession(ctx, &accountsv1.GetSessionRequest{Token: done.GetToken()}); err != nil {
		t.Errorf("the reset's own session: %v", err)
	}
	_, err = portal.SignIn(ctx, &accountsv1.SignInRequest{Email: "ann@example.com", Password: password})
	wantTwirp(t, "sign-in with the old password", err, twirp.Unauthenticated, "")
	if _, err := portal.SignIn(ctx, &accountsv1.SignInRequest{Email: "ann@example.com", Password: next}); err != nil {
		t.Errorf("sign-in with the new password: %v", err)
	}

	// Spent: once only, and nothing changes on a second try.
	before = tables(t, pool)
	_, err = portal.ResetPassword(ctx, &accountsv1.ResetPasswordRequest{Token: r.GetToken(), Password: "yet another passphrase"})
	wantTwirp(t, "a used reset", err, twirp.NotFound, "")
	_, err = portal.GetPasswordReset(ctx, &accountsv1.GetPasswordResetRequest{Token: r.GetToken()})
	wantTwirp(t, "GetPasswordReset of a used reset", err, twirp.NotFound, "")
	unchanged(t, "a used reset", before, tables(t, pool))

	// Expired: refused at its expiry, not a moment later.
	late, err := operator.CreatePasswordReset(ctx, &accountsv1.CreatePasswordResetRequest{Email: "ann@example.com"})
	if err != nil {
		t.Fatal(err)
	}
	clk.set(late.GetExpiresAt().AsTime())
	before = tables(t, pool)
	_, err = portal.ResetPassword(ctx, &accountsv1.ResetPasswordRequest{Token: late.GetToken(), Password: "yet another passphrase"})
	wantTwirp(t, "an expired reset", err, twirp.NotFound, "")
	unchanged(t, "an expired reset", before, tables(t, pool))
}

func TestLiveRequests(t *testing.T) {
	ctx := context.Background()
	portal, operator, pool, clk := newPortalClient(t)
	ann := signUp(t, portal, "ann@example.com")
	accountID := ann.GetSession().GetAccount().GetId()
	annID := ann.GetSession().GetUser().GetId()
	cat := signUp(t, portal, "cat@example.com")
	operated, err := operator.CreateAccount(ctx, &accountsv1.CreateAccountRequest{Name: "Operated"})
	if err != nil {
		t.Fatal(err)
	}

	before := tables(t, pool)
	_, err = portal.GetLiveRequest(ctx, &accountsv1.GetLiveRequestRequest{AccountId: accountID})
	wantTwirp(t, "GetLiveRequest before any", err, twirp.NotFound, "")
	_, err = portal.RequestLive(ctx, &accountsv1.RequestLiveRequest{AccountId: accountID, UserId: cat.GetSession().GetUser().GetId()})
	wantTwirp(t, "RequestLive by another account's user", err, twirp.InvalidArgument, "user_id")
	_, err = portal.RequestLive(ctx, &accountsv1.RequestLiveRequest{AccountId: accountID, UserId: "x"})
	wantTwirp(t, "RequestLive by a malformed user id", err, twirp.InvalidArgument, "user_id")
	_, err = portal.RequestLive(ctx, &accountsv1.RequestLiveRequest{AccountId: uuid.NewString(), UserId: annID})
	wantTwirp(t, "RequestLive for an unknown account", err, twirp.NotFound, "")
	_, err = portal.RequestLive(ctx, &accountsv1.RequestLiveRequest{AccountId: operated.GetId(), UserId: annID})
	wantTwirp(t, "RequestLive for an account with live", err, twirp.AlreadyExists, "account")
	unchanged(t, "refused RequestLive", before, tables(t, pool))

	first := clk.Now()
	req, err := portal.RequestLive(ctx, &accountsv1.RequestLiveRequest{AccountId: accountID, UserId: annID})
	if err != nil || req.GetAccount().GetId() != accountID || req.GetRequestedBy() != "ann@example.com" || !req.GetRequestedAt().AsTime().Equal(first.Truncate(time.Microsecond)) {
		t.Fatalf("RequestLive = %v, %v", req, err)
	}
	// Asking again keeps the first request.
	bob := invite(t, portal, accountID, "bob@example.com")
	clk.advance(time.Hour)
	again, err := portal.RequestLive(ctx, &accountsv1.RequestLiveRequest{AccountId: accountID, UserId: bob.GetSession().GetUser().GetId()})
	if err != nil || again.GetRequestedBy() != "ann@example.com" || !again.GetRequestedAt().AsTime().Equal(req.GetRequestedAt().AsTime()) {
		t.Errorf("a second RequestLive = %v, %v; want the first kept", again, err)
	}
	if _, err := portal.RequestLive(ctx, &accountsv1.RequestLiveRequest{AccountId: cat.GetSession().GetAccount().GetId(), UserId: cat.GetSession().GetUser().GetId()}); err != nil {
		t.Fatal(err)
	}
	list, err := operator.ListLiveRequests(ctx, &accountsv1.ListLiveRequestsRequest{})
	if err != nil || len(list.GetRequests()) != 2 || list.GetRequests()[0].GetAccount().GetId() != accountID ||
		list.GetRequests()[1].GetRequestedBy() != "cat@example.com" {
		t.Fatalf("ListLiveRequests = %v, %v; want ann's then cat's", list, err)
	}

	// Granting is EnableLive: the request leaves the list, and stays
	// readable.
	if _, err := operator.EnableLive(ctx, &accountsv1.EnableLiveRequest{AccountId: accountID}); err != nil {
		t.Fatal(err)
	}
	list, err = operator.ListLiveRequests(ctx, &accountsv1.ListLiveRequestsRequest{})
	if err != nil || len(list.GetRequests()) != 1 || list.GetRequests()[0].GetRequestedBy() != "cat@example.com" {
		t.Errorf("ListLiveRequests after EnableLive = %v, %v; want cat's only", list, err)
	}
	got, err := portal.GetLiveRequest(ctx, &accountsv1.GetLiveRequestRequest{AccountId: accountID})
	if err != nil || !got.GetAccount().GetLiveEnabled() || got.GetRequestedBy() != "ann@example.com" {
		t.Errorf("GetLiveRequest after EnableLive = %v, %v", got, err)
	}
	_, err = portal.GetLiveRequest(ctx, &accountsv1.GetLiveRequestRequest{AccountId: "nope"})
	wantTwirp(t, "GetLiveRequest of a malformed id", err, twirp.NotFound, "")
}
