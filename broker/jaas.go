package broker

// Kafka's JAAS configuration lines (sasl.jaas.config), as a broker's inter-broker credentials:
//
//	org.apache.kafka.common.security.scram.ScramLoginModule required username="broker" password="s3cr\"t";
//
// One login module: its class, a control flag (required, requisite, sufficient, optional),
// options key=value, and a closing semicolon. Values are words or quoted strings ("..." or
// '...', with backslash escapes as Java's StreamTokenizer reads them); // and /* */ comments are
// skipped. Errors name positions and keys, never values: the line holds a password.

import (
	"errors"
	"fmt"
	"strings"
)

// jaasEntry is a parsed login module.
type jaasEntry struct {
	module  string
	flag    string
	options map[string]string
}

type jaasToken struct {
	kind byte // 'w' word, 'q' quoted string, '=' or ';'
	text string
	pos  int
}

func jaasTokens(s string) ([]jaasToken, error) {
	var out []jaasToken
	i := 0
	for i < len(s) {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f':
			i++
		case strings.HasPrefix(s[i:], "//"):
			for i < len(s) && s[i] != '\n' && s[i] != '\r' {
				i++
			}
		case strings.HasPrefix(s[i:], "/*"):
			end := strings.Index(s[i+2:], "*/")
			if end < 0 {
				return nil, fmt.Errorf("unterminated comment at offset %d", i)
			}
			i += 2 + end + 2
		case c == '=' || c == ';':
			out = append(out, jaasToken{kind: c, pos: i})
			i++
		case c == '"' || c == '\'':
			start := i
			var sb strings.Builder
			i++
			closed := false
			for i < len(s) {
				ch := s[i]
				if ch == c {
					closed = true
					i++
					break
				}
				if ch == '\\' && i+1 < len(s) {
					i++
					switch e := s[i]; e {
					case 'n':
						sb.WriteByte('\n')
					case 't':
						sb.WriteByte('\t')
					case 'r':
						sb.WriteByte('\r')
					case 'b':
						sb.WriteByte('\b')
					case 'f':
						sb.WriteByte('\f')
					default: // \\, \", \' and any other escaped character stand for themselves
						sb.WriteByte(e)
					}
					i++
					continue
				}
				sb.WriteByte(ch)
				i++
			}
			if !closed {
				return nil, fmt.Errorf("unterminated quoted value starting at offset %d", start)
			}
			out = append(out, jaasToken{kind: 'q', text: sb.String(), pos: start})
		default:
			start := i
			for i < len(s) && !strings.ContainsRune(" \t\n\r\f=;\"'", rune(s[i])) && !strings.HasPrefix(s[i:], "//") && !strings.HasPrefix(s[i:], "/*") {
				i++
			}
			out = append(out, jaasToken{kind: 'w', text: s[start:i], pos: start})
		}
	}
	return out, nil
}

// parseJAAS parses a JAAS configuration holding exactly one login module.
func parseJAAS(s string) (jaasEntry, error) {
	toks, err := jaasTokens(s)
	if err != nil {
		return jaasEntry{}, err
	}
	if len(toks) == 0 {
		return jaasEntry{}, errors.New("empty JAAS configuration")
	}
	e := jaasEntry{options: map[string]string{}}
	i := 0
	if toks[i].kind != 'w' {
		return e, fmt.Errorf("expected the login module class at offset %d", toks[i].pos)
	}
	e.module = toks[i].text
	i++
	if i >= len(toks) || toks[i].kind != 'w' {
		return e, fmt.Errorf("expected a control flag (required, requisite, sufficient, optional) after %s", e.module)
	}
	switch f := strings.ToLower(toks[i].text); f {
	case "required", "requisite", "sufficient", "optional":
		e.flag = f
	default:
		return e, fmt.Errorf("invalid control flag at offset %d: want required, requisite, sufficient or optional", toks[i].pos)
	}
	i++
	for {
		if i >= len(toks) {
			return e, errors.New("the login module does not end with ';'")
		}
		if toks[i].kind == ';' {
			i++
			break
		}
		if toks[i].kind != 'w' {
			return e, fmt.Errorf("expected an option name at offset %d", toks[i].pos)
		}
		key := toks[i].text
		if i+2 >= len(toks) || toks[i+1].kind != '=' || (toks[i+2].kind != 'w' && toks[i+2].kind != 'q') {
			return e, fmt.Errorf("expected name=value at offset %d (quote values holding spaces, '=' or ';')", toks[i].pos)
		}
		if _, dup := e.options[key]; dup {
			return e, fmt.Errorf("an option is given twice (at offset %d)", toks[i].pos)
		}
		e.options[key] = toks[i+2].text
		i += 3
	}
	if i < len(toks) {
		return e, errors.New("more than one login module: sasl.jaas.config takes exactly one")
	}
	return e, nil
}

// jaasCredentials returns the username and password options of a JAAS configuration.
func jaasCredentials(s string) (user, pass string, err error) {
	e, err := parseJAAS(s)
	if err != nil {
		return "", "", fmt.Errorf("JAAS configuration: %w", err)
	}
	user, pass = e.options["username"], e.options["password"]
	if user == "" {
		return "", "", fmt.Errorf("JAAS configuration (%s): no username option", e.module)
	}
	if pass == "" {
		return "", "", fmt.Errorf("JAAS configuration (%s): no password option", e.module)
	}
	return user, pass, nil
}
