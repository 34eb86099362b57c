"""The domain: each resource's declaration and rules, and the service facade over them.

``objects/<resource>.py`` holds one resource's declaration (its fields, versions,
schema, scoping) and the rules beyond CRUD; :mod:`.crud` is the generic CRUD every
declaration gets; :mod:`.service` is the facade the HTTP handlers call.
"""
