"""Trees as OCI images: pushed to a registry, one reproducible layer per stored distribution, and pulled back
into another repo's store through the store's own protocol.

- :mod:`.reference`: ``HOST[:PORT]/REPOSITORY`` references and the tag a tree's image gets;
- :mod:`.layer`: a stored distribution as a reproducible gzip tar layer, and a layer unpacked under bounds;
- :mod:`.image`: the config, manifest and index documents, written canonically and read strictly;
- :mod:`.auth`: credentials for a registry (Docker's and containers' auth files, helpers, netrc);
- :mod:`.client`: the distribution API over httpx (HEAD before upload, token auth, redirects);
- :mod:`.push`: a tree's image pushed; :mod:`.pull`: a tree's image found and its layers stored.
"""
