"""onyxia.cli"""
