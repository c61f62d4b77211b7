package broker

// AlterUserScramCredentials (key 51), v0. Upsertions carry what the client computed (salt and
// salted password, as Kafka's clients do; the password never reaches the broker); the broker
// keeps only the stored and server keys derived from them. Deletions name a user and a
// mechanism. One result per user; a user's changes apply only if all of them are valid:
// UNACCEPTABLE_CREDENTIAL for an empty name, an empty salt or salted password, or iterations
// outside [4096, 16384]; UNSUPPORTED_SASL_MECHANISM for an unknown mechanism;
// DUPLICATE_RESOURCE when a (user, mechanism) pair appears twice in the request;
// RESOURCE_NOT_FOUND when deleting a credential that does not exist. The valid users' changes
// go to the metadata log in one record batch. Needs ALTER on the cluster.

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/acl"
	"github.com/weir-mq/weir/netio"
)

func init() {
	register(apiDef{key: 51, min: 0, max: 0, handle: handleAlterUserScramCredentials})
}

func handleAlterUserScramCredentials(b *Broker, r *netio.Request) netio.Reply {
	req := r.Body.(*kmsg.AlterUserSCRAMCredentialsRequest)
	resp := req.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)
	resp.SetVersion(r.Version)

	type userErr struct {
		code int16
		msg  string
	}
	var order []string
	errs := map[string]*userErr{}
	seen := map[string]bool{}
	note := func(user string) {
		if !seen[user] {
			seen[user] = true
			order = append(order, user)
		}
	}
	setErr := func(user string, e *kerr.Error, msg string) {
		if errs[user] == nil {
			errs[user] = &userErr{e.Code, msg}
		}
	}
	type pair struct {
		user string
		mech int8
	}
	pairs := map[pair]int{}
	for _, d := range req.Deletions {
		note(d.Name)
		pairs[pair{d.Name, d.Mechanism}]++
	}
	for _, u := range req.Upsertions {
		note(u.Name)
		pairs[pair{u.Name, u.Mechanism}]++
	}
	if e := b.authorizeCluster(r, acl.OpAlter); e != nil {
		for _, u := range order {
			res := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
			res.User, res.ErrorCode = u, e.Code
			resp.Results = append(resp.Results, res)
		}
		return netio.Reply{Response: resp}
	}
	for p, n := range pairs {
		if n > 1 {
			setErr(p.user, kerr.DuplicateResource, "A user credential cannot be altered twice in the same request")
		}
	}
	creds := b.scramCredentials()
	puts := map[string]map[string]scramCredential{}
	dels := map[string][]string{}
	for _, d := range req.Deletions {
		mech, ok := scramMechanismName(d.Mechanism)
		switch {
		case d.Name == "":
			setErr(d.Name, kerr.UnacceptableCredential, "Username must not be empty")
		case !ok:
			setErr(d.Name, kerr.UnsupportedSaslMechanism, "Unknown SCRAM mechanism")
		default:
			if _, exists := creds[d.Name][mech]; !exists {
				setErr(d.Name, kerr.ResourceNotFound, "Attempt to delete a user credential that does not exist")
			}
			dels[d.Name] = append(dels[d.Name], scramKey(mech, d.Name))
		}
	}
	for _, u := range req.Upsertions {
		mech, ok := scramMechanismName(u.Mechanism)
		switch {
		case u.Name == "":
			setErr(u.Name, kerr.UnacceptableCredential, "Username must not be empty")
		case !ok:
			setErr(u.Name, kerr.UnsupportedSaslMechanism, "Unknown SCRAM mechanism")
		case u.Iterations < scramMinIterations:
			setErr(u.Name, kerr.UnacceptableCredential, "Too few iterations")
		case u.Iterations > scramMaxIterations:
			setErr(u.Name, kerr.UnacceptableCredential, "Too many iterations")
		case len(u.Salt) == 0:
			setErr(u.Name, kerr.UnacceptableCredential, "Salt must not be empty")
		default:
			h, _ := scramMechanismHash(mech)
			if len(u.SaltedPassword) != h().Size() {
				setErr(u.Name, kerr.UnacceptableCredential, "Salted password has the wrong length for the mechanism")
				continue
			}
			if puts[u.Name] == nil {
				puts[u.Name] = map[string]scramCredential{}
			}
			// Copy: the request's bytes alias the pooled frame.
			salt := append([]byte(nil), u.Salt...)
			puts[u.Name][scramKey(mech, u.Name)] = newScramCredential(h, salt, u.SaltedPassword, u.Iterations)
		}
	}
	allPuts := map[string]scramCredential{}
	var allDels []string
	for _, user := range order {
		if errs[user] != nil {
			continue
		}
		for k, c := range puts[user] {
			allPuts[k] = c
		}
		allDels = append(allDels, dels[user]...)
	}
	if len(allPuts) > 0 || len(allDels) > 0 {
		ctx, cancel := b.requestCtx()
		err := b.putScramCredentials(ctx, allPuts, allDels)
		cancel()
		if err != nil {
			e := kerr.UnknownServerError
			var ke *kerr.Error
			if errors.As(err, &ke) {
				e = ke
			}
			for _, user := range order {
				setErr(user, e, err.Error())
			}
		}
	}
	for _, user := range order {
		res := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
		res.User = user
		if e := errs[user]; e != nil {
			res.ErrorCode = e.code
			msg := e.msg
			res.ErrorMessage = &msg
		}
		resp.Results = append(resp.Results, res)
	}
	return netio.Reply{Response: resp}
}
