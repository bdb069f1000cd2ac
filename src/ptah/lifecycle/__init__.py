"""The mutation lifecycle, stated once: authorize, claim, bind the realm, resolve the admission
envelope, cross the dispatch boundary, supervise, account, retain, prove or refuse, release."""
