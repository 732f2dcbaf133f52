package web

import (
	"errors"
	"net/http"
	"strings"

	"github.com/twitchtv/twirp"

	"github.com/esimplatform/esim/libs/telemetry"
	"github.com/esimplatform/esim/services/portal"
)

// code is a service error's Twirp code, or "" for anything else. An
// intermediary's answer (a proxy's 404) is no verdict of the service's.
func code(err error) twirp.ErrorCode {
	var terr twirp.Error
	if !errors.As(err, &terr) || terr.Meta("http_error_from_intermediary") != "" {
		return ""
	}
	return terr.Code()
}

// meta is one meta entry of a service error.
func meta(err error, key string) string {
	var terr twirp.Error
	if errors.As(err, &terr) {
		return terr.Meta(key)
	}
	return ""
}

// fieldError turns a service's invalid_argument into a message for the
// form field it names, when the form has that field (fields maps the
// services' argument names to the form's labels). ok is false for any
// other error.
func fieldError(err error, fields map[string]string) (field, message string, ok bool) {
	if code(err) != twirp.InvalidArgument {
		return "", "", false
	}
	arg := meta(err, "argument")
	label, known := fields[arg]
	if !known {
		return "", "", false
	}
	reason := meta(err, "reason")
	if reason == "" {
		var terr twirp.Error
		errors.As(err, &terr)
		reason = strings.TrimPrefix(terr.Msg(), arg+" ")
	}
	return arg, label + " " + reason, true
}

// fail answers an error no form can show: not_found is the 404 page;
// anything else is the platform's fault, logged here with its cause and
// shown only as "Something went wrong" with the request id.
func (a *App) fail(w http.ResponseWriter, r *http.Request, err error) {
	if code(err) == twirp.NotFound {
		a.notFound(w, r)
		return
	}
	a.Log.ErrorContext(r.Context(), "page failed", "path", r.URL.Path, "err", err)
	a.errorPage(w, r, http.StatusInternalServerError, "Something went wrong", "")
}

func (a *App) notFound(w http.ResponseWriter, r *http.Request) {
	a.errorPage(w, r, http.StatusNotFound, "Page not found", "There is nothing here, or it belongs to another account or environment.")
}

// errorPage renders a page of its own for status; the 500 page names the
// request id, which support finds the cause by in the logs.
// A signed-in user's error page keeps the navigation, leading to the
// environment of the path (sandbox when it names none).
func (a *App) errorPage(w http.ResponseWriter, r *http.Request, status int, title, message string) {
	v := view{Title: title, Session: sessionOf(r), Data: errorData{
		Status: status, Message: message, RequestID: telemetry.RequestID(r.Context()),
	}}
	for _, env := range portal.Environments {
		if first, _, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/"); first == string(env) {
			v.navEnv = env
		}
	}
	a.render(w, r, status, "error.html", v)
}

type errorData struct {
	Status    int
	Message   string
	RequestID string
}
