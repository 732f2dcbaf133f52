package web

import (
	"net/http"
	"strings"

	"github.com/twitchtv/twirp"
	"google.golang.org/protobuf/types/known/timestamppb"

	accountsv1 "github.com/esimplatform/esim/proto/accounts/v1"
)

// Self-serve access: the users of an account invite and remove each other,
// a person follows an invite or a password reset link an operator made,
// and a sandbox-only account asks for live.

// accessRoutes adds the pages of self-serve access.
func (a *App) accessRoutes(handle func(string, http.HandlerFunc)) {
	handle("GET /settings/users", a.signedIn(a.usersPage))
	handle("POST /settings/users", a.signedIn(a.inviteUser))
	handle("GET /settings/users/{id}/remove", a.signedIn(a.removeUserPage))
	handle("POST /settings/users/{id}/remove", a.signedIn(a.removeUser))
	handle("GET /invite/{token}", a.invitePage)
	handle("POST /invite/{token}", a.acceptInvite)
	handle("GET /reset/{token}", a.resetPage)
	handle("POST /reset/{token}", a.resetPassword)
	handle("GET /live/access", a.signedIn(a.liveAccessPage))
	handle("POST /live/access", a.signedIn(a.requestLive))
}

// --- users of the account

type usersData struct {
	Users []*accountsv1.User
	// Me is the signed-in user's id: the list marks them.
	Me string
	// Invite is the link just made, shown this once.
	Invite *inviteLink
}

type inviteLink struct {
	Email, URL string
	Expires    *timestamppb.Timestamp
}

func (a *App) usersPage(w http.ResponseWriter, r *http.Request, s *session) {
	v := view{Title: "Users", Session: s, Section: "users", Errors: map[string]string{}}
	if r.URL.Query().Get("done") == "removed" {
		v.Notice = "The user was removed; every session they had was signed out."
	}
	a.renderUsers(w, r, s, http.StatusOK, v)
}

// renderUsers lists the account's users under v.
func (a *App) renderUsers(w http.ResponseWriter, r *http.Request, s *session, status int, v view) {
	res, err := a.Accounts.ListUsers(r.Context(), &accountsv1.ListUsersRequest{AccountId: s.accountID()})
	if err != nil {
		a.fail(w, r, err)
		return
	}
	data, _ := v.Data.(usersData)
	data.Users, data.Me = res.GetUsers(), s.GetUser().GetId()
	v.Data = data
	a.render(w, r, status, "users.html", v)
}

func (a *App) inviteUser(w http.ResponseWriter, r *http.Request, s *session) {
	email := strings.TrimSpace(r.PostFormValue("email"))
	v := view{Title: "Users", Session: s, Section: "users", Errors: map[string]string{}, Form: map[string]string{"email": email}}
	// New users only: re-inviting a user would let whoever holds the link
	// set their password.
	res, err := a.Accounts.InviteUser(r.Context(), &accountsv1.InviteUserRequest{AccountId: s.accountID(), Email: email, NewUserOnly: true})
	if err != nil {
		if field, msg, ok := fieldError(err, map[string]string{"email": "Email"}); ok {
			v.Errors[field] = msg
		} else if code(err) == twirp.AlreadyExists && meta(err, "reason") == "is already a user of this account" {
			v.Errors["email"] = "This email is already a user of this account. If they forgot their password, the sign-in page says how to get a reset link."
		} else if code(err) == twirp.AlreadyExists {
			v.Errors["email"] = "This email already belongs to a user of another account."
		} else {
			a.fail(w, r, err)
			return
		}
		a.renderUsers(w, r, s, http.StatusBadRequest, v)
		return
	}
	// Answered here, not after a redirect: the link is in this response
	// only (pages are never cached), and accounts keeps only its hash.
	v.Form = nil
	v.Data = usersData{Invite: &inviteLink{
		Email: strings.ToLower(email), URL: selfURL(r, a.SecureCookies) + "/invite/" + res.GetToken(),
		Expires: res.GetExpiresAt(),
	}}
	a.renderUsers(w, r, s, http.StatusOK, v)
}

// selfURL is the portal's own origin as this request reached it, for the
// links it hands out.
func selfURL(r *http.Request, secure bool) string {
	scheme := "http"
	if r.TLS != nil || secure {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

// userOf finds a user of the signed-in user's account by id; nil when
// the account has none with it.
func (a *App) userOf(r *http.Request, s *session, id string) (*accountsv1.User, error) {
	res, err := a.Accounts.ListUsers(r.Context(), &accountsv1.ListUsersRequest{AccountId: s.accountID()})
	if err != nil {
		return nil, err
	}
	for _, u := range res.GetUsers() {
		if u.GetId() == id {
			return u, nil
		}
	}
	return nil, nil
}

type removeData struct {
	User *accountsv1.User
	Self bool
}

func (a *App) removeUserPage(w http.ResponseWriter, r *http.Request, s *session) {
	u, err := a.userOf(r, s, r.PathValue("id"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if u == nil {
		a.notFound(w, r)
		return
	}
	a.render(w, r, http.StatusOK, "user_remove.html", view{Title: "Remove a user", Session: s,
		Data: removeData{User: u, Self: u.GetId() == s.GetUser().GetId()}})
}

func (a *App) removeUser(w http.ResponseWriter, r *http.Request, s *session) {
	id := r.PathValue("id")
	_, err := a.Accounts.RemoveUser(r.Context(), &accountsv1.RemoveUserRequest{AccountId: s.accountID(), UserId: id})
	switch {
	case code(err) == twirp.FailedPrecondition && meta(err, "reason") == "last_user":
		a.renderUsers(w, r, s, http.StatusConflict, view{Title: "Users", Session: s, Section: "users", Errors: map[string]string{},
			Error: "The account's last user cannot be removed: invite someone else first."})
		return
	case err != nil:
		a.fail(w, r, err)
		return
	}
	if id == s.GetUser().GetId() {
		// Removed themselves: their session is gone with them.
		a.clearSessionCookie(w)
		http.Redirect(w, r, "/signin", http.StatusSeeOther)
		return
	}
	http.Redirect(w, r, "/settings/users?done=removed", http.StatusSeeOther)
}

// --- following an invite

type inviteData struct {
	Token  string
	Invite *accountsv1.Invite
	// SignedInAs is the email of another user signed in in this browser,
	// whom accepting signs out: said on the page, never done silently.
	SignedInAs, SignedInAccount string
}

const deadInvite = "This invitation is not valid: it was used already, it expired, or the link is incomplete. Ask for a new one."

// inviteView looks the invite up, and who is signed in here; ok is false
// when it has answered (a dead link, or a failure).
func (a *App) inviteView(w http.ResponseWriter, r *http.Request) (v view, signedIn *session, ok bool) {
	token := r.PathValue("token")
	v = view{Title: "Join your team", Errors: map[string]string{}}
	inv, err := a.Accounts.GetInvite(r.Context(), &accountsv1.GetInviteRequest{Token: token})
	if code(err) == twirp.NotFound {
		// No password is asked for a link that can only fail.
		v.Error = deadInvite
		a.render(w, r, http.StatusNotFound, "invite.html", v)
		return v, nil, false
	}
	if err != nil {
		a.fail(w, r, err)
		return v, nil, false
	}
	data := inviteData{Token: token, Invite: inv}
	if s, err := a.currentSession(r); err == nil && s.GetUser().GetEmail() != inv.GetEmail() {
		data.SignedInAs, data.SignedInAccount, signedIn = s.GetUser().GetEmail(), s.GetAccount().GetName(), s
	}
	v.Data = data
	return v, signedIn, true
}

func (a *App) invitePage(w http.ResponseWriter, r *http.Request) {
	if v, _, ok := a.inviteView(w, r); ok {
		a.render(w, r, http.StatusOK, "invite.html", v)
	}
}

func (a *App) acceptInvite(w http.ResponseWriter, r *http.Request) {
	v, signedIn, ok := a.inviteView(w, r)
	if !ok {
		return
	}
	if signedIn != nil && r.PostFormValue("switch") != "1" {
		// Someone else signed in here since the page was shown: say so
		// and ask again rather than switch users under them.
		v.Error = "You are now signed in as " + signedIn.GetUser().GetEmail() + ". Joining signs you out; confirm below."
		a.render(w, r, http.StatusConflict, "invite.html", v)
		return
	}
	if !a.claimSignUp(w, r, "invite.html", v) {
		return
	}
	res, err := a.Accounts.AcceptInvite(r.Context(), &accountsv1.AcceptInviteRequest{Token: r.PathValue("token"), Password: r.PostFormValue("password")})
	if err != nil {
		if field, msg, ok := fieldError(err, map[string]string{"password": "Password"}); ok {
			v.Errors[field] = msg
			a.render(w, r, http.StatusBadRequest, "invite.html", v)
			return
		}
		switch code(err) {
		case twirp.NotFound, twirp.Unauthenticated, twirp.FailedPrecondition, twirp.InvalidArgument, twirp.AlreadyExists:
			a.render(w, r, http.StatusBadRequest, "invite.html", view{Title: v.Title, Error: deadInvite})
		default:
			a.fail(w, r, err)
		}
		return
	}
	a.endSession(r, signedIn)
	a.setSessionCookie(w, res)
	http.Redirect(w, r, "/sandbox/", http.StatusSeeOther)
}

// endSession signs out the session a link's new sign-in replaces in this
// browser; the user agreed to it on the page.
func (a *App) endSession(r *http.Request, s *session) {
	if s == nil {
		return
	}
	if _, err := a.Accounts.SignOut(r.Context(), &accountsv1.SignOutRequest{Token: s.token}); err != nil && code(err) != twirp.Unauthenticated {
		// The cookie is replaced anyway; the old session expires.
		a.Log.WarnContext(r.Context(), "could not end the replaced session", "err", err)
	}
}

// --- following a password reset link

type resetData struct {
	Token string
	Reset *accountsv1.PasswordReset
	// As in inviteData.
	SignedInAs string
}

const deadReset = "This password reset link is not valid: it was used already, it expired, or the link is incomplete. Ask for a new one."

func (a *App) resetView(w http.ResponseWriter, r *http.Request) (v view, signedIn *session, ok bool) {
	token := r.PathValue("token")
	v = view{Title: "Choose a new password", Errors: map[string]string{}}
	reset, err := a.Accounts.GetPasswordReset(r.Context(), &accountsv1.GetPasswordResetRequest{Token: token})
	if code(err) == twirp.NotFound {
		v.Error = deadReset
		a.render(w, r, http.StatusNotFound, "reset.html", v)
		return v, nil, false
	}
	if err != nil {
		a.fail(w, r, err)
		return v, nil, false
	}
	data := resetData{Token: token, Reset: reset}
	if s, err := a.currentSession(r); err == nil && s.GetUser().GetEmail() != reset.GetEmail() {
		data.SignedInAs, signedIn = s.GetUser().GetEmail(), s
	}
	v.Data = data
	return v, signedIn, true
}

func (a *App) resetPage(w http.ResponseWriter, r *http.Request) {
	if v, _, ok := a.resetView(w, r); ok {
		a.render(w, r, http.StatusOK, "reset.html", v)
	}
}

func (a *App) resetPassword(w http.ResponseWriter, r *http.Request) {
	v, signedIn, ok := a.resetView(w, r)
	if !ok {
		return
	}
	if signedIn != nil && r.PostFormValue("switch") != "1" {
		v.Error = "You are now signed in as " + signedIn.GetUser().GetEmail() + ". Resetting signs you out; confirm below."
		a.render(w, r, http.StatusConflict, "reset.html", v)
		return
	}
	// The same budget as sign-ups: each attempt costs accounts a hash.
	if !a.claimSignUp(w, r, "reset.html", v) {
		return
	}
	res, err := a.Accounts.ResetPassword(r.Context(), &accountsv1.ResetPasswordRequest{Token: r.PathValue("token"), Password: r.PostFormValue("password")})
	if err != nil {
		if field, msg, ok := fieldError(err, map[string]string{"password": "Password"}); ok {
			v.Errors[field] = msg
			a.render(w, r, http.StatusBadRequest, "reset.html", v)
			return
		}
		if code(err) == twirp.NotFound {
			a.render(w, r, http.StatusBadRequest, "reset.html", view{Title: v.Title, Error: deadReset})
			return
		}
		a.fail(w, r, err)
		return
	}
	a.endSession(r, signedIn)
	a.setSessionCookie(w, res)
	http.Redirect(w, r, "/settings/password?done=1", http.StatusSeeOther)
}

// --- asking for live

type liveAccessData struct {
	Request *accountsv1.LiveRequest
}

func (a *App) liveAccessPage(w http.ResponseWriter, r *http.Request, s *session) {
	if s.GetAccount().GetLiveEnabled() {
		http.Redirect(w, r, "/live/", http.StatusSeeOther)
		return
	}
	req, err := a.Accounts.GetLiveRequest(r.Context(), &accountsv1.GetLiveRequestRequest{AccountId: s.accountID()})
	if err != nil && code(err) != twirp.NotFound {
		a.fail(w, r, err)
		return
	}
	v := view{Title: "Live access", Session: s, Data: liveAccessData{Request: req}}
	if r.URL.Query().Get("done") == "1" && req != nil {
		v.Notice = "Your request was sent. An operator reviews it; live opens here once it is granted."
	}
	a.render(w, r, http.StatusOK, "live_access.html", v)
}

func (a *App) requestLive(w http.ResponseWriter, r *http.Request, s *session) {
	_, err := a.Accounts.RequestLive(r.Context(), &accountsv1.RequestLiveRequest{AccountId: s.accountID(), UserId: s.GetUser().GetId()})
	if code(err) == twirp.AlreadyExists {
		// Granted meanwhile.
		http.Redirect(w, r, "/live/", http.StatusSeeOther)
		return
	}
	if err != nil {
		a.fail(w, r, err)
		return
	}
	http.Redirect(w, r, "/live/access?done=1", http.StatusSeeOther)
}
