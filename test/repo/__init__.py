"""Repository checks: the docs against the code, the README's example, packaging and the
extension's type stub. Plugin behaviour is in test/pinpool, the CI scripts in test/ci."""
