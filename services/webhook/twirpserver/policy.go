package twirpserver

import "github.com/esimplatform/esim/libs/internalauth"

// Policy is who may call each method. Endpoints and their secrets are
// set and read by operators (esimctl) and the portal, where partners
// manage them: the gateway, which faces the internet, never sees a
// secret. Events and their attempts are read by the gateway (GET
// /events) and the portal for the partner they authenticated, and by
// operators for anyone.
var Policy = internalauth.Policy{
	"SetEndpoint":   {internalauth.Operator, internalauth.Portal},
	"GetEndpoint":   {internalauth.Operator, internalauth.Portal},
	"RotateSecret":  {internalauth.Operator, internalauth.Portal},
	"SendTestEvent": {internalauth.Operator, internalauth.Portal},
	"ListEvents":    {internalauth.Gateway, internalauth.Operator, internalauth.Portal},
	"GetEvent":      {internalauth.Gateway, internalauth.Operator, internalauth.Portal},
}
