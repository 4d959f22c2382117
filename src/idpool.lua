#!lua name=idpool
