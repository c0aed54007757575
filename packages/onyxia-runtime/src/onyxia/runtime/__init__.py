"""onyxia.runtime"""
