package validate

import "strings"

// Fast paths. A snapshot of 1,000 nodes and 30,000 pods holds some 200,000 label keys and values;
// apimachinery's checks run a regular expression on each (about 230 ms a snapshot on the
// benchmark machine, a quarter of its decoding). These byte loops accept exactly what
// apimachinery's content.IsLabelKey, IsLabelValue, IsDNS1123Label and IsDNS1123Subdomain accept
// (TestFastPathsAgreeWithApimachinery checks them against each other); a string they do not
// accept goes to apimachinery, which says why, so every message is the API server's own.

// labelChar is [-A-Za-z0-9_.]; alnum is [A-Za-z0-9].
func alnum(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' }

func labelChar(c byte) bool { return alnum(c) || c == '-' || c == '_' || c == '.' }

// labelNameOK: 1-63 characters of [-A-Za-z0-9_.], starting and ending alphanumeric (labelKeyFmt).
func labelNameOK(s string) bool {
	if len(s) == 0 || len(s) > 63 || !alnum(s[0]) || !alnum(s[len(s)-1]) {
		return false
	}
	for i := 1; i < len(s)-1; i++ {
		if !labelChar(s[i]) {
			return false
		}
	}
	return true
}

// labelValueOK: empty, or a labelNameOK string (labelValueFmt, LabelValueMaxLength 63).
func labelValueOK(s string) bool { return s == "" || labelNameOK(s) }

// labelKeyOK: [prefix/]name, prefix a DNS-1123 subdomain (IsLabelKey).
func labelKeyOK(s string) bool {
	prefix, name, ok := strings.Cut(s, "/")
	if !ok {
		return labelNameOK(s)
	}
	return dns1123SubdomainOK(prefix) && labelNameOK(name)
}

// dns1123LabelOK: 1-63 characters of [-a-z0-9], starting and ending with [a-z0-9].
func dns1123LabelOK(s string) bool {
	if len(s) == 0 || len(s) > 63 || !lowerAlnum(s[0]) || !lowerAlnum(s[len(s)-1]) {
		return false
	}
	for i := 1; i < len(s)-1; i++ {
		if !lowerAlnum(s[i]) && s[i] != '-' {
			return false
		}
	}
	return true
}

// dns1123SubdomainOK: at most 253 characters of dot-separated DNS-1123 labels. The
// subdomain pattern does not bound each label's length; only the whole is bounded.
func dns1123SubdomainOK(s string) bool {
	if len(s) == 0 || len(s) > 253 {
		return false
	}
	for part := range strings.SplitSeq(s, ".") {
		if len(part) == 0 || !lowerAlnum(part[0]) || !lowerAlnum(part[len(part)-1]) {
			return false
		}
		for i := 1; i < len(part)-1; i++ {
			if !lowerAlnum(part[i]) && part[i] != '-' {
				return false
			}
		}
	}
	return true
}

func lowerAlnum(c byte) bool { return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' }
