"""Security: API key secrets, signed access tokens, the OAuth2 token endpoint's rules, authorization."""
