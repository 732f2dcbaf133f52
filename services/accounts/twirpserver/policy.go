package twirpserver

import "github.com/esimplatform/esim/libs/internalauth"

// Policy is who may call each method: the gateway resolves partners' keys
// and nothing more; everything that creates or changes accounts and keys
// takes an operator credential. The portal signs its users in and, for
// the account of the user signed in, shows the account and manages its
// keys: the account id it passes comes from the session it resolved, so
// it never lists accounts or enables live. It invites, lists and removes
// the users of the signed-in user's account, and asks for live for it.
var Policy = internalauth.Policy{
	"Authenticate":   {internalauth.Gateway},
	"CreateAccount":  {internalauth.Operator},
	"GetAccount":     {internalauth.Operator, internalauth.Portal},
	"ListAccounts":   {internalauth.Operator},
	"SetRateLimit":   {internalauth.Operator},
	"CreateKey":      {internalauth.Operator, internalauth.Portal},
	"ListKeys":       {internalauth.Operator, internalauth.Portal},
	"RevokeKey":      {internalauth.Operator, internalauth.Portal},
	"EnableLive":     {internalauth.Operator},
	"InviteUser":     {internalauth.Operator, internalauth.Portal},
	"SignUp":         {internalauth.Portal},
	"SignIn":         {internalauth.Portal},
	"GetSession":     {internalauth.Portal},
	"SignOut":        {internalauth.Portal},
	"ChangePassword": {internalauth.Portal},
	// Operators too: make run gives its demo user a password this way.
	"AcceptInvite": {internalauth.Portal, internalauth.Operator},
	"GetInvite":    {internalauth.Portal},
	"ListUsers":    {internalauth.Operator, internalauth.Portal},
	"RemoveUser":   {internalauth.Operator, internalauth.Portal},
	// Only operators hand out reset links: a portal user who could would
	// take over a colleague's sign-in.
	"CreatePasswordReset": {internalauth.Operator},
	"GetPasswordReset":    {internalauth.Portal},
	"ResetPassword":       {internalauth.Portal},
	"RequestLive":         {internalauth.Portal},
	"GetLiveRequest":      {internalauth.Operator, internalauth.Portal},
	"ListLiveRequests":    {internalauth.Operator},
}
