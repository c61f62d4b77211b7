package broker

// DescribeUserScramCredentials (key 50), v0. Lists users' SCRAM mechanisms and iteration
// counts (never salts or keys): every user with a credential when the request names none;
// RESOURCE_NOT_FOUND for a named user without any, DUPLICATE_RESOURCE for a user named twice.
// Needs DESCRIBE on the cluster (CLUSTER_AUTHORIZATION_FAILED at the top level otherwise).

import (
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/acl"
	"github.com/weir-mq/weir/netio"
)

func init() {
	register(apiDef{key: 50, min: 0, max: 0, handle: handleDescribeUserScramCredentials})
}

func handleDescribeUserScramCredentials(b *Broker, r *netio.Request) netio.Reply {
	req := r.Body.(*kmsg.DescribeUserSCRAMCredentialsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeUserSCRAMCredentialsResponse)
	resp.SetVersion(r.Version)
	if e := b.authorizeCluster(r, acl.OpDescribe); e != nil {
		resp.ErrorCode = e.Code
		return netio.Reply{Response: resp}
	}
	creds := b.scramCredentials()
	result := func(user string) kmsg.DescribeUserSCRAMCredentialsResponseResult {
		res := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
		res.User = user
		mechs := creds[user]
		if len(mechs) == 0 {
			res.ErrorCode = kerr.ResourceNotFound.Code
			msg := "Attempt to describe a user credential that does not exist"
			res.ErrorMessage = &msg
			return res
		}
		for _, name := range []string{mechScramSHA256, mechScramSHA512} {
			if c, ok := mechs[name]; ok {
				ci := kmsg.NewDescribeUserSCRAMCredentialsResponseResultCredentialInfo()
				ci.Mechanism, ci.Iterations = scramMechanismCode(name), c.Iterations
				res.CredentialInfos = append(res.CredentialInfos, ci)
			}
		}
		return res
	}
	if len(req.Users) == 0 {
		users := make([]string, 0, len(creds))
		for u := range creds {
			users = append(users, u)
		}
		sort.Strings(users)
		for _, u := range users {
			resp.Results = append(resp.Results, result(u))
		}
		return netio.Reply{Response: resp}
	}
	count := map[string]int{}
	for _, u := range req.Users {
		count[u.Name]++
	}
	done := map[string]bool{}
	for _, u := range req.Users {
		if done[u.Name] {
			continue
		}
		done[u.Name] = true
		if count[u.Name] > 1 {
			res := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
			res.User = u.Name
			res.ErrorCode = kerr.DuplicateResource.Code
			msg := "Cannot describe SCRAM credentials for the same user twice in a single request"
			res.ErrorMessage = &msg
			resp.Results = append(resp.Results, res)
			continue
		}
		resp.Results = append(resp.Results, result(u.Name))
	}
	return netio.Reply{Response: resp}
}
