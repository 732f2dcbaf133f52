package twirpserver

import "github.com/esimplatform/esim/libs/internalauth"

// Policy is who may call each method: only the gateway orders, for the
// partner it authenticated, and reads the public QR image's code; the
// gateway and operators (esimctl) read orders and eSIMs.
var Policy = internalauth.Policy{
	"CreateOrder":       {internalauth.Gateway},
	"GetOrder":          {internalauth.Gateway, internalauth.Operator},
	"ListOrders":        {internalauth.Gateway, internalauth.Operator},
	"GetEsim":           {internalauth.Gateway, internalauth.Operator},
	"ListEsims":         {internalauth.Gateway, internalauth.Operator},
	"GetActivationCode": {internalauth.Gateway},
	"CheckProvider":     {internalauth.Operator},
}
