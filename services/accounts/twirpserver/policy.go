package twirpserver

import "github.com/esimplatform/esim/libs/internalauth"

// Policy is who may call each method: the gateway resolves partners' keys
// and nothing more; everything that creates or changes accounts and keys
// takes an operator credential.
var Policy = internalauth.Policy{
	"Authenticate":  {internalauth.Gateway},
	"CreateAccount": {internalauth.Operator},
	"GetAccount":    {internalauth.Operator},
	"ListAccounts":  {internalauth.Operator},
	"SetRateLimit":  {internalauth.Operator},
	"CreateKey":     {internalauth.Operator},
	"ListKeys":      {internalauth.Operator},
	"RevokeKey":     {internalauth.Operator},
}
