package twirpserver

import "github.com/esimplatform/esim/libs/internalauth"

// Policy is who may call each method: the gateway resolves partners' keys
// and nothing more; everything that creates or changes accounts and keys
// takes an operator credential. The portal signs its users in and, for
// the account of the user signed in, shows the account and manages its
// keys: the account id it passes comes from the session it resolved, so
// it never lists accounts, invites users or enables live.
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
	"InviteUser":     {internalauth.Operator},
	"SignUp":         {internalauth.Portal},
	"SignIn":         {internalauth.Portal},
	"GetSession":     {internalauth.Portal},
	"SignOut":        {internalauth.Portal},
	"ChangePassword": {internalauth.Portal},
	// Operators too: make run gives its demo user a password this way.
	"AcceptInvite": {internalauth.Portal, internalauth.Operator},
}
