package twirpserver

import "github.com/esimplatform/esim/libs/internalauth"

// Policy is who may call each method, by least privilege: whoever may
// call a method can move the money it moves. Only ordering debits and
// refunds, as it charges and refunds orders; only an operator credential
// (esimctl) tops up, since a top-up puts money into a balance, and reads
// whole ledgers. The gateway, which faces the internet, only reads a
// balance (GET /balance): compromised, it can neither spend nor mint.
// Ordering may read the balance it debits, and operators any. The portal
// reads the signed-in partner's balance and ledger, and tops up their
// sandbox balance, where no real money moves: TopUp refuses it any other
// environment (see TopUp), so a compromised portal mints only play money.
var Policy = internalauth.Policy{
	"TopUp":      {internalauth.Operator, internalauth.Portal},
	"Debit":      {internalauth.Ordering},
	"Refund":     {internalauth.Ordering},
	"GetBalance": {internalauth.Gateway, internalauth.Operator, internalauth.Ordering, internalauth.Portal},
	"ListLedger": {internalauth.Operator, internalauth.Portal},
}
