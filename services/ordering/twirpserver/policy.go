package twirpserver

import "github.com/esimplatform/esim/libs/internalauth"

// Policy is who may call each method: only the gateway orders, for the
// partner it authenticated, and reads the public QR image's code; the
// gateway, the portal (for the partner signed in, always with a scope,
// which only an operator may leave out) and operators (esimctl) read
// orders and eSIMs.
var Policy = internalauth.Policy{
	"CreateOrder":       {internalauth.Gateway},
	"GetOrder":          {internalauth.Gateway, internalauth.Operator, internalauth.Portal},
	"GetOrders":         {internalauth.Gateway, internalauth.Operator, internalauth.Portal},
	"ListOrders":        {internalauth.Gateway, internalauth.Operator, internalauth.Portal},
	"GetEsim":           {internalauth.Gateway, internalauth.Operator, internalauth.Portal},
	"ListEsims":         {internalauth.Gateway, internalauth.Operator, internalauth.Portal},
	"GetActivationCode": {internalauth.Gateway},
	"CheckProvider":     {internalauth.Operator},
	"CreateTopUp":       {internalauth.Gateway},
	// The portal's search box, for the partner signed in; operators
	// (esimctl) look up a partner's too.
	"Search": {internalauth.Operator, internalauth.Portal},
	// Operators simulate for partners (esimctl esims simulate); the
	// scope is still a sandbox one.
	"SimulateEsim": {internalauth.Gateway, internalauth.Operator},
}
